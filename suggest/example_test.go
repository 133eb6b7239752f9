package suggest_test

import (
	"fmt"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/suggest"
)

// nothingBefore stands for a broker that denies nothing before its
// allow rules (the example's denials are a reviewer's).
func nothingBefore(grants.Request) (string, bool) { return "", false }

func ExampleFor() {
	denied := suggest.Boundary{Surface: boundary.Filesystem, Operation: boundary.OpReadFile,
		Path: "/home/u/My Data/[draft].csv", Decision: broker.Deny, Source: broker.SourceNoReviewer}
	s := suggest.For(denied, "/home/u", "/home/u/.config/sandboxd/policy.toml", nothingBefore)
	fmt.Println(s.Rule)
	fmt.Print(s.TOML)

	secret := suggest.Boundary{Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/home/u/.ssh/id_rsa",
		Decision: broker.Deny, Source: broker.SourceHardDeny, Rationale: "credential stores are never opened to a sandboxed command"}
	fmt.Println(suggest.For(secret, "/home/u", "/home/u/.config/sandboxd/policy.toml", nothingBefore).Why)
	// Output:
	// fs read_file ~/My\ Data/\[draft\].csv
	// # Add to the allow list of [boundaries] in your policy file /home/u/.config/sandboxd/policy.toml
	// # (a deny or ask rule that matches the same boundary still wins):
	// [boundaries]
	// allow = [
	//   "fs read_file ~/My\\ Data/\\[draft\\].csv",
	// ]
	// a hard deny, decided before any allow rule: credential stores are never opened to a sandboxed command
}
