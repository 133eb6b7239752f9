package policy

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"unicode"

	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/persist"
)

// Bounds of [review] production: a marker is a name's glob, not a
// document, and a list long enough to hold every name a person means.
const (
	maxProductionMarkers = 64
	maxProductionMarker  = 64
)

// DefaultProduction returns the built-in production markers: a boundary
// whose target is named by one is critical, whatever else names it
// ("staging-prod" is production). [review] production adds to them;
// nothing removes them. The result is a fresh slice.
func DefaultProduction() []string {
	return []string{"prod", "prd", "production"}
}

// ProductionPlace is one cloud or cluster configuration place of the
// caller's (credstore.ClusterConfigs), where the names below say which
// account or cluster a command acts on.
type ProductionPlace struct {
	// Path is absolute and clean.
	Path string
	// Tool names the program whose configuration it is.
	Tool string
}

// checkProduction is the validator of [review] production: at most
// maxProductionMarkers entries, each normalised by normProduction.
func checkProduction(v reflect.Value) (int, string) {
	if v.Len() > maxProductionMarkers {
		return -1, fmt.Sprintf("at most %d production markers", maxProductionMarkers)
	}
	return checkList(v, normProduction)
}

// normProduction accepts one production marker, a glob over one name (a
// host, one of its labels, a path's component, or a segment of a label
// or component) as path.Match reads it, and returns it in lower case:
// markers match whatever the case. A marker holds no path separator (no
// name it is matched against has one) and no space or control
// character.
func normProduction(s string) (string, string) {
	switch {
	case s == "":
		return "", "empty production marker"
	case len(s) > maxProductionMarker:
		return "", fmt.Sprintf("production marker longer than %d bytes", maxProductionMarker)
	case strings.ContainsAny(s, "/\\"):
		return "", fmt.Sprintf("production marker %q holds a path separator: a marker matches one name (a host, one of its labels, one component of a path)", s)
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return "", fmt.Sprintf("production marker %q holds a space or control character", s)
	}
	low := strings.ToLower(s)
	if _, err := path.Match(low, ""); err != nil {
		return "", fmt.Sprintf("production marker %q is not a valid pattern", s)
	}
	return low, ""
}

// resolveProduction is the built-in markers and the policy's, then the
// caller's cloud and cluster configuration places: each at every place
// the caller's environment puts it and at its default, and, when it
// exists, its symlink-resolved form too.
func resolveProduction(p Policy, d Dirs, home string, real *persist.Realpaths) ([]string, []ProductionPlace) {
	var markers orderedSet
	markers.add(DefaultProduction()...)
	markers.add(p.Review.Production...)
	var seen orderedSet
	var places []ProductionPlace
	dirs := credstore.Dirs{Home: home, Getenv: d.Getenv}
	for _, c := range credstore.ClusterConfigs() {
		for _, at := range c.Paths(dirs) {
			for _, x := range []string{filepath.Clean(at), realpathOf(real, filepath.Clean(at))} {
				if !seen.has(x) {
					seen.add(x)
					places = append(places, ProductionPlace{Path: x, Tool: c.Tool})
				}
			}
		}
	}
	return markers.list, places
}
