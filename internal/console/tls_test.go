package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/ledger"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, PEM, and returns their paths.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "atmost console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// With a certificate and its key the console serves HTTPS, and its cookies are Secure; a
// certificate without its key is refused.
func TestListenServesTLSWithSecureCookies(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "test"})
	require.NoError(t, err)
	certFile, keyFile := selfSigned(t)
	_, err = console.Listen(context.Background(), console.Config{Ledger: l}, "127.0.0.1:0", certFile, "")
	require.Error(t, err)

	running, err := console.Listen(context.Background(), console.Config{Ledger: l, Token: testToken}, "127.0.0.1:0", certFile, keyFile)
	require.NoError(t, err)
	defer func() { require.NoError(t, running.Stop()) }()
	require.Regexp(t, `^https://127\.0\.0\.1:\d+$`, running.URL)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(running.URL + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	require.NotEmpty(t, resp.Cookies())
	for _, c := range resp.Cookies() {
		require.True(t, c.Secure, c.Name)
	}
	resp, err = http.Get("http" + running.URL[len("https"):] + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no plain HTTP on the TLS address")
}
