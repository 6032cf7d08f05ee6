package deploy_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// promConfig is the part of Prometheus's configuration that deploy/prometheus uses. It is decoded
// strictly: a key outside it (a service discovery, a relabelling, another scrape option) fails
// the test instead of passing unseen, since any of them can change what is scraped; a config
// that needs one adds it here and to the checks. github.com/prometheus/prometheus/config would
// know every key, but brings the AWS, Azure and Google SDKs and Kubernetes' client into the
// module graph for one test; `promtool check config` validates the files in full by hand.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		Scheme        string `yaml:"scheme"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// prometheusConfig returns the path on the host of the config file that a size's Prometheus
// reads: the file mounted, read-only, where its --config.file points.
func prometheusConfig(t *testing.T, p *types.Project) string {
	t.Helper()
	servers := byImage(p, "prom/prometheus:")
	require.Len(t, servers, 1, "one Prometheus")
	s := servers[0]
	inContainer, ok := flag(s.Command, "--config.file")
	require.True(t, ok, "%s: no --config.file", s.Name)
	for _, v := range s.Volumes {
		if v.Target == inContainer {
			require.Equal(t, types.VolumeTypeBind, v.Type, "%s: %s must be a file of the repository", s.Name, inContainer)
			require.True(t, v.ReadOnly, "%s: mount %s read-only", s.Name, inContainer)
			require.True(t, filepath.IsAbs(v.Source), "%s: %s", s.Name, v.Source)
			return v.Source
		}
	}
	t.Fatalf("%s: nothing is mounted at %s", s.Name, inContainer)
	return ""
}

func loadPrometheusConfig(t *testing.T, path string) promConfig {
	t.Helper()
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	var cfg promConfig
	require.NoError(t, dec.Decode(&cfg), "%s", path)
	for _, d := range []string{cfg.Global.ScrapeInterval, cfg.Global.EvaluationInterval} {
		if d != "" {
			_, err := model.ParseDuration(d)
			require.NoError(t, err, "%s", path)
		}
	}
	return cfg
}

func TestPrometheusScrapesEveryRoleAndNothingElse(t *testing.T) {
	for _, z := range sizes {
		t.Run(z.profile, func(t *testing.T) {
			p := loadCompose(t, z.profile)
			path := prometheusConfig(t, p)
			cfg := loadPrometheusConfig(t, path)

			scraped := map[string]bool{}
			jobs := map[string]bool{}
			for _, sc := range cfg.ScrapeConfigs {
				require.NotEmpty(t, sc.JobName, "%s: a scrape config without a job_name", path)
				require.False(t, jobs[sc.JobName], "%s: job %s twice", path, sc.JobName)
				jobs[sc.JobName] = true
				require.Contains(t, []string{"", "/metrics"}, sc.MetricsPath, "%s: job %s: the roles serve /metrics", path, sc.JobName)
				require.Contains(t, []string{"", "http"}, sc.Scheme, "%s: job %s: the roles serve plain HTTP", path, sc.JobName)
				for _, static := range sc.StaticConfigs {
					for _, target := range static.Targets {
						host, port, err := net.SplitHostPort(target)
						require.NoError(t, err, "%s: target %q", path, target)
						s, ok := p.Services[host]
						require.True(t, ok, "%s: target %s is no service of the %s profile", path, target, z.profile)
						_, isRole := z.roles[binary(s)]
						require.True(t, isRole && s.Build != nil, "%s: target %s is not a role", path, target)
						// A job is a role: dashboards and alerts select a role by job.
						require.Equal(t, binary(s), sc.JobName, "%s: target %s runs %s", path, target, binary(s))
						require.Equal(t, httpPort(t, s), port, "%s: target %s: %s serves /metrics on its ATMOST_HTTP_ADDR", path, target, s.Name)
						require.False(t, scraped[host], "%s: %s is scraped twice", path, host)
						scraped[host] = true
					}
				}
			}
			roles := roleServices(p, z)
			require.NotEmpty(t, roles)
			for _, s := range roles {
				require.True(t, scraped[s.Name], "%s: role %s is not scraped", path, s.Name)
			}
		})
	}
}
