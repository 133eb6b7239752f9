package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Yarn's .yarnrc.yml and pnpm's pnpm-workspace.yaml are YAML mappings
// whose top-level keys are settings. Yarn reads them with js-yaml's
// FAILSAFE schema and json: true (@yarnpkg/parsers syml.ts: every scalar a
// string, a repeated key's last value wins); pnpm with js-yaml's default
// schema (merge keys, a repeated key an error). sandboxd reads the YAML
// itself (go.yaml.in/yaml/v3) and takes every top-level key, every
// occurrence of it, and what a merge key ("<<") or a complex key (which
// js-yaml turns into a string) brings in: a setting found more often than
// the tool would find it is refused more often, never less.

// yamlTop is one top-level key of a YAML mapping and its value in a
// canonical spelling (aliases followed).
type yamlTop struct{ key, value string }

// maxYAMLNodes bounds the nodes read while following aliases: a file
// that expands past it is refused (a "billion laughs" file).
const maxYAMLNodes = 100_000

// yarnLegacy is Yarn's LEGACY_REGEXP: a file whose leading comments say
// "yarn lockfile v1" is read with the old "key value" grammar instead.
var yarnLegacy = regexp.MustCompile(`(?i)^(#.*(\r?\n))*?#\s+yarn\s+lockfile\s+v1\r?\n`)

// yamlTopKeys reads b as one YAML document holding a mapping (or
// nothing) and returns its top-level keys.
func yamlTopKeys(b []byte) ([]yamlTop, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty: no settings
		}
		return nil, syntaxError("YAML", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, nil
	}
	root := doc.Content[0]
	budget := maxYAMLNodes
	var out []yamlTop
	var mapping func(n *yaml.Node, depth int) error
	mapping = func(n *yaml.Node, depth int) error {
		for n.Kind == yaml.AliasNode && n.Alias != nil && depth < 32 {
			n, depth = n.Alias, depth+1
		}
		switch {
		case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
			return nil
		case n.Kind != yaml.MappingNode || depth >= 32:
			return errors.New("the top level is not a mapping of settings")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ks, err := yamlString(k, &budget, 0)
			if err != nil {
				return err
			}
			if yamlMerges(k, ks) {
				// A merge key brings in a mapping's keys, or a sequence
				// of mappings'; so does __proto__, which js-yaml makes
				// the object's prototype, whose keys the tools then read.
				m := v
				for m.Kind == yaml.AliasNode && m.Alias != nil {
					m = m.Alias
				}
				if m.Kind == yaml.SequenceNode {
					for _, e := range m.Content {
						if err := mapping(e, depth+1); err != nil {
							return err
						}
					}
					continue
				}
				if err := mapping(m, depth+1); err != nil {
					return err
				}
			}
			vs, err := yamlCanon(v, &budget, 0)
			if err != nil {
				return err
			}
			out = append(out, yamlTop{ks, vs})
		}
		return nil
	}
	if err := mapping(root, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// yamlMerges reports a key whose value's keys a JavaScript reader takes
// as the mapping's own: "<<", any key tagged as a merge (js-yaml merges
// a !!merge key whatever its text), and "__proto__".
func yamlMerges(k *yaml.Node, ks string) bool {
	for k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	return ks == "<<" || ks == "__proto__" || k.Tag == "!!merge" || k.ShortTag() == "!!merge" || k.Tag == "tag:yaml.org,2002:merge"
}

// yamlString is a key as js-yaml makes it a string: a scalar's value, a
// sequence's elements joined by ",", "[object Object]" for a mapping.
func yamlString(n *yaml.Node, budget *int, depth int) (string, error) {
	if *budget--; *budget < 0 || depth > 32 {
		return "", errors.New("too many YAML nodes")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return "", errors.New("a dangling alias")
		}
		return yamlString(n.Alias, budget, depth+1)
	case yaml.ScalarNode:
		if n.Tag == "!!null" && (n.Value == "" || n.Value == "~" || strings.EqualFold(n.Value, "null")) {
			return "null", nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for i, e := range n.Content {
			s, err := yamlString(e, budget, depth+1)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "[object Object]", nil
}

// yamlCanon spells a value canonically, aliases followed.
func yamlCanon(n *yaml.Node, budget *int, depth int) (string, error) {
	if *budget--; *budget < 0 || depth > 64 {
		return "", errors.New("too many YAML nodes")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return "", errors.New("a dangling alias")
		}
		return yamlCanon(n.Alias, budget, depth+1)
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value), nil
	case yaml.SequenceNode, yaml.MappingNode:
		var b strings.Builder
		b.WriteString("[")
		if n.Kind == yaml.MappingNode {
			b.WriteString("{")
		}
		for _, e := range n.Content {
			s, err := yamlCanon(e, budget, depth+1)
			if err != nil {
				return "", err
			}
			b.WriteString(s + ",")
		}
		b.WriteString("]")
		return b.String(), nil
	}
	return "", errors.New("an unknown YAML node")
}

// yarnrcYMLSettings is the SettingsRule of .yarnrc.yml: the keys Yarn 2
// and later, and Yarn 1.22 (which reads .yarnrc.yml for yarnPath and,
// when that is not a string, keeps every key as a .yarnrc setting), run
// something from.
func yarnrcYMLSettings(b []byte, _ SettingsEnv) ([]Setting, error) {
	if yarnLegacy.Match(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))) {
		return nil, errors.New("its comments make Yarn read it with the old lockfile grammar")
	}
	tops, err := yamlTopKeys(b)
	if err != nil {
		return nil, err
	}
	var out []Setting
	for _, t := range tops {
		if why, ok := yarnRuns[t.key]; ok {
			out = append(out, Setting{Key: t.key, Value: t.value, Why: why})
		} else if strings.HasPrefix(t.key, "--") {
			out = append(out, Setting{Key: t.key, Value: t.value, Why: "Yarn 1 reads it as a command-line flag"})
		}
	}
	return out, nil
}

// yarnRuns are the .yarnrc.yml settings that name a program, plugin,
// preload or file Yarn runs (Yarn 4's Configuration.ts and Yarn 1's
// src/rc.js), and when.
var yarnRuns = map[string]string{
	"yarnPath":                "Yarn runs it instead of itself on every command",
	"yarn-path":               "Yarn 1 runs it instead of itself on every command",
	"ignorePath":              "decides whether Yarn runs yarnPath",
	"plugins":                 "Yarn loads (and may download) these plugins on every command",
	"injectEnvironmentFiles":  "Yarn adds these files' variables (NODE_OPTIONS among them) to every script",
	"enableConstraintsChecks": "yarn install runs yarn.config.cjs",
	"constraintsPath":         "yarn constraints reads rules from it",
	"pnpShebang":              "Yarn writes it as the interpreter of .pnp.cjs",
	"script-shell":            "Yarn 1 runs every script with this shell",
	"env":                     "Yarn 1 adds it to every script's environment",
	"prefix":                  "Yarn 1 puts <prefix>/bin on scripts' PATH",
	"plugnplay-shebang":       "Yarn 1 writes it as the interpreter of .pnp.js",
	"lockfileFilename":        "moves where Yarn takes the project's root from",
}

// pnpmWorkspaceSettings is the SettingsRule of pnpm-workspace.yaml, whose
// settings pnpm 10 and later read in camelCase (and pnpm 10 passes
// kebab-case ones to scripts): keys compared without case and dashes.
func pnpmWorkspaceSettings(b []byte, _ SettingsEnv) ([]Setting, error) {
	tops, err := yamlTopKeys(b)
	if err != nil {
		return nil, err
	}
	var out []Setting
	for _, t := range tops {
		k := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(t.key))
		if strings.Contains(t.key, "${") {
			out = append(out, Setting{Key: t.key, Value: t.value, Why: "a key with a variable can become any setting"})
		} else if why, ok := pnpmRuns[k]; ok {
			out = append(out, Setting{Key: t.key, Value: t.value, Why: why})
		}
	}
	return out, nil
}

// pnpmRuns are pnpm-workspace.yaml settings (lower case, no dashes) that
// name a program, shell, preload, plugin or pnpmfile pnpm runs, or a
// Node.js or pnpm it downloads and runs (pnpm's config types).
var pnpmRuns = map[string]string{
	"scriptshell":                  "pnpm runs every script with this shell",
	"nodeoptions":                  "pnpm passes it to every script as NODE_OPTIONS (--require preloads a file)",
	"pnpmfile":                     "pnpm runs it on every command",
	"globalpnpmfile":               "pnpm runs it on every command",
	"npmpath":                      "pnpm runs it for commands it passes to npm",
	"configdependencies":           "pnpm loads the plugins it names on every command",
	"lockfiledir":                  "moves where pnpm loads .pnpmfile.cjs from",
	"dir":                          "moves the project pnpm works on",
	"nodeversion":                  "pnpm runs scripts with that Node.js",
	"usenodeversion":               "pnpm downloads that Node.js and runs scripts with it",
	"nodedownloadmirrors":          "pnpm downloads Node.js from it and runs scripts with it",
	"runtime":                      "pnpm downloads and runs that runtime",
	"runtimeonfail":                "pnpm downloads and runs a runtime",
	"pmonfail":                     "pnpm downloads and runs the package manager package.json names",
	"managepackagemanagerversions": "pnpm downloads and runs the package manager package.json names",
	"executionenv":                 "pnpm runs scripts with the Node.js it names",
	"dangerouslyallowallbuilds":    "pnpm runs every dependency's install scripts",
	"userconfig":                   "pnpm loads another config file from it",
	"globalconfig":                 "pnpm loads another config file from it",
}
