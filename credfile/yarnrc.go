package credfile

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YarnrcYML returns a .yarnrc.yml without its credentials: every
// mapping entry whose key names one (npmAuthToken, npmAuthIdent,
// npmPassword-like spellings, anything with token, auth, passw or
// secret in it, at any depth: under npmScopes and npmRegistries too)
// and every scalar that is a URL with a user in it or mentions a token
// or password. It fails closed: a file that is not one plain YAML
// mapping, or that uses anchors, aliases, merge keys or tags (which
// could carry a value under another name), yields an empty copy.
func YarnrcYML(data []byte) []byte {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	var extra yaml.Node
	if dec.Decode(&extra) == nil {
		return nil // a second document: yarn reads one
	}
	if !plainYAML(&doc) {
		return nil
	}
	clean(doc.Content[0])
	doc.HeadComment, doc.LineComment, doc.FootComment = "", "", ""
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil
	}
	enc.Close()
	return out.Bytes()
}

// plainYAML reports whether n and everything below it is free of
// anchors, aliases, merge keys and explicit tags.
func plainYAML(n *yaml.Node) bool {
	if n.Anchor != "" || n.Kind == yaml.AliasNode || (n.Tag != "" && n.Style&yaml.TaggedStyle != 0) {
		return false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!merge" {
		return false
	}
	for _, c := range n.Content {
		if !plainYAML(c) {
			return false
		}
	}
	return true
}

// clean removes credential entries and values below n, and comments.
func clean(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	switch n.Kind {
	case yaml.MappingNode:
		var kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || yarnSecret(k.Value) || secretValue(k.Value) || (v.Kind == yaml.ScalarNode && secretValue(v.Value)) {
				continue
			}
			clean(k)
			clean(v)
			kept = append(kept, k, v)
		}
		n.Content = kept
	case yaml.SequenceNode:
		var kept []*yaml.Node
		for _, c := range n.Content {
			if c.Kind == yaml.ScalarNode && secretValue(c.Value) {
				continue
			}
			clean(c)
			kept = append(kept, c)
		}
		n.Content = kept
	}
}

// yarnSecret reports whether a .yarnrc.yml key names a credential.
func yarnSecret(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "token") || strings.Contains(k, "auth") || strings.Contains(k, "ident") ||
		strings.Contains(k, "passw") || strings.Contains(k, "secret")
}
