package sandbox

import (
	"slices"
	"testing"
)

func TestAddGitConfig(t *testing.T) {
	env := []string{"A=1", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0=http://p"}
	got := addGitConfig(env, layerGitConfig("/w/repo/"))
	want := []string{"A=1", "GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0=http://p",
		"GIT_CONFIG_KEY_1=url.file:///w/repo/.insteadOf", "GIT_CONFIG_VALUE_1=/w/repo/",
		"GIT_CONFIG_KEY_2=url.file:///w/repo.insteadOf", "GIT_CONFIG_VALUE_2=/w/repo",
		"GIT_CONFIG_COUNT=3"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := addGitConfig([]string{"B=2"}, [][2]string{{"k.x", "v"}}); !slices.Equal(got, []string{"B=2", "GIT_CONFIG_KEY_0=k.x", "GIT_CONFIG_VALUE_0=v", "GIT_CONFIG_COUNT=1"}) {
		t.Errorf("without a count: %q", got)
	}
}
