package identity

import (
	"os"
	"os/exec"
	"testing"
)

// nodeCheck is the JavaScript implementation's check against the shared vectors. It proves
// that the rule docs/producers.md states is implementable outside Go, from the page alone, and
// it is the derivation a TypeScript client reuses.
const nodeCheck = "../../clients/typescript/identity/check-vectors.mjs"

func TestTheVectorsHoldInJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is not installed, and CI must run the JavaScript check of the identity vectors: %v", err)
		}
		t.Skipf("needs Node.js (node on PATH) to run the JavaScript key rule against the identity vectors: %v", err)
	}
	out, err := exec.Command(node, nodeCheck, vectorsPath).CombinedOutput()
	if err != nil {
		t.Fatalf("the JavaScript key rule disagrees with the vectors (%v):\n%s", err, out)
	}
	t.Logf("%s", out)
}
