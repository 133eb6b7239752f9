package credstore

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
)

// sniffBytes is how much of a key-like file is read: a combined file
// (a key after a certificate chain) keeps its key within this.
const sniffBytes = 64 << 10

// keyMarkers are byte strings only a private key's encoding holds.
var keyMarkers = [][]byte{
	[]byte("PRIVATE KEY-----"),                                 // RFC 7468 PEM: PKCS#8, encrypted PKCS#8, RSA, EC, DSA, OpenSSH
	[]byte("-----BEGIN PGP PRIVATE KEY BLOCK-----"),            // RFC 4880 §6.2 armored secret key
	[]byte("PuTTY-User-Key-File-"),                             // PuTTY .ppk
	[]byte("AGE-SECRET-KEY-1"),                                 // age identity (age-encryption.org/v1)
	[]byte("-----BEGIN ARGO TUNNEL TOKEN-----"),                // cloudflared origin certificate
	[]byte("untrusted comment: minisign encrypted secret key"), // minisign secret key
}

// privateKey reports whether head, the first bytes of a file, holds a
// private key: a PEM, OpenPGP, PuTTY, age or minisign secret, a
// WireGuard PrivateKey line, or a DER structure that starts as private
// keys do (a SEQUENCE whose first element is a small INTEGER version:
// PKCS#1 and PKCS#8 0 or 1, SEC 1 EC keys 1, PKCS#12 3), which a
// certificate (whose first element is a SEQUENCE) never does.
func privateKey(head []byte) bool {
	for _, m := range keyMarkers {
		if bytes.Contains(head, m) {
			return true
		}
	}
	for _, line := range bytes.Split(head, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if k, _, ok := bytes.Cut(line, []byte("=")); ok && string(bytes.TrimSpace(k)) == "PrivateKey" {
			return true // wg(8) configuration
		}
	}
	return derPrivateKey(head)
}

// derPrivateKey reports whether b starts with a DER SEQUENCE whose first
// element is INTEGER 0, 1 or 3.
func derPrivateKey(b []byte) bool {
	if len(b) < 2 || b[0] != 0x30 {
		return false
	}
	n := int(b[1])
	i := 2
	switch {
	case n < 0x80:
	case n == 0x81 || n == 0x82 || n == 0x83:
		i += n - 0x80
	default:
		return false
	}
	if len(b) < i+3 {
		return false
	}
	return b[i] == 0x02 && b[i+1] == 0x01 && (b[i+2] == 0 || b[i+2] == 1 || b[i+2] == 3)
}

// sniffFile reads the start of the regular file at p, as the caller, and
// reports whether it is a private key. A file the caller cannot read
// is none of the command's business either (it runs as the caller or
// with less); anything but a regular file is not sniffed (a FIFO would
// block).
func sniffFile(p string) (bool, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false, err
	}
	head, err := io.ReadAll(io.LimitReader(f, sniffBytes))
	if err != nil {
		return false, err
	}
	return privateKey(head), nil
}
