package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
)

// PublicKeyName is the public half of the log's key, beside the log.
const PublicKeyName = "audit.pub"

// loadOrCreateKey reads the Ed25519 private key at path (PKCS#8 PEM),
// creating it 0600 when absent. A key others may read is refused: a
// checkpoint proves the writer's hand only while the key is the writer's.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: open key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: stat key: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit: key %s: mode %v, want a regular file only its owner may read", path, st.Mode())
	}
	b, err := readBounded(f, 16<<10)
	if err != nil {
		return nil, fmt.Errorf("audit: read key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit: key %s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: parse key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: key %s is not an Ed25519 key", path)
	}
	return priv, nil
}

// createKey makes a new key at path, exclusively: two writers racing to
// create it (they hold the log's lock, but the key may live elsewhere)
// never overwrite each other's.
func createKey(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("audit: encode key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: create key: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("audit: write key: %w", err)
	}
	return priv, nil
}

// encodePublicKey is pub as a PKIX PEM block.
func encodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("audit: encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// publishKey writes pub to path (0644, so any user can verify), or
// checks that the one there is pub: a log whose published key is not
// its writer's would fail every verification, so it is an error now.
func publishKey(path string, pub ed25519.PublicKey) error {
	have, err := ReadPublicKey(path)
	switch {
	case err == nil && have.Equal(pub):
		return nil
	case err == nil:
		return fmt.Errorf("audit: %s is not the public half of the log's key", path)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	b, err := encodePublicKey(pub)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFileSync(path, b, 0o644); err != nil {
		return fmt.Errorf("audit: publish key: %w", err)
	}
	// The umask may have taken the bits others need to verify.
	if err := os.Chmod(path, 0o644); err != nil {
		return fmt.Errorf("audit: publish key: %w", err)
	}
	return nil
}

// ReadPublicKey reads a public key written beside a log (PKIX PEM).
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: open public key: %w", err)
	}
	defer f.Close()
	b, err := readBounded(f, 16<<10)
	if err != nil {
		return nil, fmt.Errorf("audit: read public key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("audit: %s is not a PEM public key", path)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: parse public key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("audit: %s is not an Ed25519 public key", path)
	}
	return pub, nil
}

// readBounded reads all of f, refusing more than limit bytes.
func readBounded(f io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
}

// fingerprint names a public key in a genesis record.
func fingerprint(pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return hex.EncodeToString(s[:])
}

// checkpointMessage is what a checkpoint signs. The domain string keeps
// a checkpoint's signature from standing for a head's, and the other way.
func checkpointMessage(chain string, seq uint64, prev string, t time.Time) []byte {
	return signed("sandboxd audit checkpoint v1", chain, seq, prev, t)
}

// headMessage is what the head file signs.
func headMessage(chain string, seq uint64, hash string, t time.Time) []byte {
	return signed("sandboxd audit head v1", chain, seq, hash, t)
}

func signed(domain, chain string, seq uint64, hash string, t time.Time) []byte {
	b := make([]byte, 0, 192)
	b = append(b, domain...)
	b = append(b, '\n')
	b = append(b, chain...)
	b = append(b, '\n')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '\n')
	b = append(b, hash...)
	b = append(b, '\n')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return b
}
