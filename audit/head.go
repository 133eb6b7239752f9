package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
)

// HeadName is the signed head beside the log: it names the last
// checkpoint, so that cutting whole records or files from the end of the
// log is seen.
const HeadName = "audit.head"

// headFile is the head's contents. Hash is the hash of the checkpoint's
// line; Sig signs headMessage.
type headFile struct {
	Chain string    `json:"chain"`
	Seq   uint64    `json:"seq"`
	Hash  string    `json:"hash"`
	Time  time.Time `json:"time"`
	Sig   string    `json:"sig"`
}

// writeHead replaces the head, durably: it is written only after the
// checkpoint it names is synced, so a crash never leaves a head ahead of
// the log.
func writeHead(dir string, priv ed25519.PrivateKey, h headFile) error {
	h.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, headMessage(h.Chain, h.Seq, h.Hash, h.Time)))
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("audit: encode head: %w", err)
	}
	path := filepath.Join(dir, HeadName)
	if err := atomicfile.WriteFileSync(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("audit: write head: %w", err)
	}
	// Anyone who may verify the log reads the head (the umask may have
	// taken their bit).
	if err := os.Chmod(path, 0o644); err != nil {
		return fmt.Errorf("audit: write head: %w", err)
	}
	return nil
}

// errHeadSig marks a head not signed by the key it is checked with (or
// not a head at all).
var errHeadSig = errors.New("the head file is not signed by the published key")

// loadHead reads and checks the head at path; nil and no error when
// there is none.
func loadHead(path string, pub ed25519.PublicKey) (*headFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: open head: %w", err)
	}
	defer f.Close()
	b, err := readBounded(f, 4<<10)
	if err != nil {
		return nil, fmt.Errorf("audit: read head: %w", err)
	}
	var h headFile
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: %w", errHeadSig, err)
	}
	sig, err := base64.StdEncoding.DecodeString(h.Sig)
	if err != nil || !ed25519.Verify(pub, headMessage(h.Chain, h.Seq, h.Hash, h.Time), sig) {
		return nil, errHeadSig
	}
	return &h, nil
}
