package credstore

import (
	"slices"
	"strings"
	"testing"
)

// TestClusterConfigsFollowTheEnvironment: each tool's variable moves its
// place (KUBECONFIG a list of files), and the default places stay.
func TestClusterConfigsFollowTheEnvironment(t *testing.T) {
	env := map[string]string{
		"KUBECONFIG":      "/srv/kube/prd.yaml:relative/ignored:/etc/kube/dev.yaml",
		"CLOUDSDK_CONFIG": "/var/lib/gcloud",
		"XDG_CONFIG_HOME": "/home/u/xdg",
	}
	d := Dirs{Home: "/home/u", Getenv: func(k string) string { return env[k] }}
	var got []string
	for _, s := range ClusterConfigs() {
		got = append(got, s.Paths(d)...)
	}
	for _, want := range []string{"/home/u/.kube", "/srv/kube/prd.yaml", "/etc/kube/dev.yaml",
		"/var/lib/gcloud", "/home/u/.config/gcloud", "/home/u/xdg/helm", "/home/u/.config/helm", "/home/u/.aws"} {
		if !slices.Contains(got, want) {
			t.Errorf("places lack %s: %v", want, got)
		}
	}
	for _, p := range got {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "relative") {
			t.Errorf("place %q is not absolute", p)
		}
	}
}

// TestClusterConfigsDocumented: every entry names its tool and the
// tool's documentation, and is placed the way Store says.
func TestClusterConfigsDocumented(t *testing.T) {
	for _, s := range ClusterConfigs() {
		if s.Tool == "" || !strings.HasPrefix(s.Doc, "https://") {
			t.Errorf("%s: no tool or documentation", s.At)
		}
		if !strings.HasPrefix(s.At, "~/") && !strings.HasPrefix(s.At, "$") {
			t.Errorf("%s: neither under the home nor a variable", s.At)
		}
	}
}
