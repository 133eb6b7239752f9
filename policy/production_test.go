package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestProductionValidate: markers are lower-cased globs over one name,
// bounded in length and count; anything else names the entry.
func TestProductionValidate(t *testing.T) {
	long := strings.Repeat("p", maxProductionMarker+1)
	many := strings.TrimSuffix(strings.Repeat(`"m", `, maxProductionMarkers+1), ", ")
	tests := []struct {
		doc     string
		want    []string // normalised, when valid
		wantErr string
	}{
		{`production = ["Live", "PRD-*", "blue?", "prod.example.com"]`, []string{"live", "prd-*", "blue?", "prod.example.com"}, ""},
		{`production = []`, []string{}, ""},
		{`production = [""]`, nil, "review.production: empty production marker"},
		{`production = ["ok", "eu/prod"]`, nil, "production marker \"eu/prod\" holds a path separator"},
		{`production = ["a\\b"]`, nil, "holds a path separator"},
		{`production = ["pro d"]`, nil, "holds a space or control character"},
		{`production = ["pro\u0007d"]`, nil, "holds a space or control character"},
		{`production = ["[prod"]`, nil, "is not a valid pattern"},
		{`production = ["` + long + `"]`, nil, fmt.Sprintf("longer than %d bytes", maxProductionMarker)},
		{`production = [` + many + `]`, nil, fmt.Sprintf("at most %d production markers", maxProductionMarkers)},
	}
	for _, tc := range tests {
		p, err := Parse("p.toml", []byte("[review]\n"+tc.doc+"\n"), Default())
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tc.doc, err, tc.wantErr)
		case tc.wantErr == "" && !slices.Equal(p.Review.Production, tc.want):
			t.Errorf("%s: %q, want %q", tc.doc, p.Review.Production, tc.want)
		}
	}
}

// TestProductionOnlyAdds: a workspace adds markers to the user's and
// removes none (an empty list keeps the user's); the operator's list
// binds, and a user's adds to it; the built-in markers stay whatever
// any of them says.
func TestProductionOnlyAdds(t *testing.T) {
	ws, err := merge(t, "[review]\nproduction = [\"live\"]\n", "[review]\nproduction = [\"blue\", \"live\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := ws.Review.Production; !slices.Equal(got, []string{"live", "blue"}) {
		t.Errorf("workspace merge: %q, want [live blue]", got)
	}
	ws, err = merge(t, "[review]\nproduction = [\"live\"]\n", "[review]\nproduction = []\n")
	if err != nil || !slices.Equal(ws.Review.Production, []string{"live"}) {
		t.Errorf("an empty workspace list: %q, %v; want the user's [live]", ws.Review.Production, err)
	}
	m, err := underMachine(t, "[policy.review]\nproduction = [\"ops-*\"]\n", "[review]\nproduction = [\"live\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Review.Production; !slices.Equal(got, []string{"ops-*", "live"}) {
		t.Errorf("under the machine: %q, want [ops-* live]", got)
	}
	if m2, err := underMachine(t, "[policy.review]\nproduction = [\"ops-*\"]\n", "[review]\nproduction = []\n"); err != nil || !slices.Equal(m2.Review.Production, []string{"ops-*"}) {
		t.Errorf("a user's empty list under the machine: %q, %v; want the operator's [ops-*]", m2.Review.Production, err)
	}
	r, err := m.Resolve(Dirs{Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"prod", "prd", "production", "ops-*", "live"}; !slices.Equal(r.Production, want) {
		t.Errorf("resolved markers %q, want %q", r.Production, want)
	}
}

// TestProductionPlacesFollowTheCaller: the configuration places are the
// caller's, where their environment moves them, and the defaults.
func TestProductionPlacesFollowTheCaller(t *testing.T) {
	env := map[string]string{"KUBECONFIG": "/srv/kube/prd.yaml", "AZURE_CONFIG_DIR": "/opt/az"}
	r, err := Default().Resolve(Dirs{Home: "/home/u", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range r.ProductionPlaces {
		if p.Tool == "" {
			t.Errorf("%s names no tool", p.Path)
		}
		got = append(got, p.Path)
	}
	for _, want := range []string{"/home/u/.kube", "/srv/kube/prd.yaml", "/opt/az", "/home/u/.azure", "/home/u/.config/gcloud", "/home/u/.aws"} {
		if !slices.Contains(got, want) {
			t.Errorf("places lack %s: %v", want, got)
		}
	}
	if !slices.Equal(r.Production, DefaultProduction()) {
		t.Errorf("default markers %q", r.Production)
	}
}
