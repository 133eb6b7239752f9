package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/audit"
)

// A writer appends events; anyone who can read the directory verifies
// the log with the published key.
func Example() {
	ctx := context.Background()
	base, err := os.MkdirTemp("", "audit-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "log")

	l, err := audit.Open(ctx, audit.Config{Dir: dir, KeyFile: filepath.Join(base, "audit.key")})
	if err != nil {
		log.Fatal(err)
	}
	uid := 1000
	for _, target := range []string{"registry.npmjs.org:443", "/home/dev/.npmrc"} {
		if _, err := l.Append(ctx, audit.Event{Kind: audit.KindDecision, UID: &uid, Target: target, Outcome: "allow", Source: "model"}); err != nil {
			log.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil { // signs the last records
		log.Fatal(err)
	}

	pub, err := audit.ReadPublicKey(filepath.Join(dir, audit.PublicKeyName))
	if err != nil {
		log.Fatal(err)
	}
	files, err := audit.Files(dir)
	if err != nil {
		log.Fatal(err)
	}
	s, err := audit.Verify(ctx, files, pub)
	fmt.Printf("%d records, %d checkpoints, last signed %d, %v\n", s.Records, s.Checkpoints, s.LastSigned, err)
	// Output: 5 records, 2 checkpoints, last signed 4, <nil>
}
