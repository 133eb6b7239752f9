package landlock

import (
	"errors"
	"fmt"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Access is a set of Landlock filesystem rights.
type Access uint64

// Single rights the sandbox names on its own.
const (
	AccessExecute   Access = llsys.AccessFSExecute
	AccessWriteFile Access = llsys.AccessFSWriteFile
	AccessReadFile  Access = llsys.AccessFSReadFile
	AccessReadDir   Access = llsys.AccessFSReadDir
	AccessTruncate  Access = llsys.AccessFSTruncate
	AccessIoctlDev  Access = llsys.AccessFSIoctlDev
)

// Rights a read-only hierarchy gets.
const ReadAccess Access = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir

// fileRights are the rights that may be attached to a rule on a
// non-directory; the kernel refuses the others with EINVAL.
const fileRights Access = llsys.AccessFSExecute | llsys.AccessFSWriteFile |
	llsys.AccessFSReadFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev

// Support is what the running kernel's Landlock offers.
type Support struct {
	ABI    int    // 0 when Landlock is unavailable
	Errata int    // bitmask of fixed errata (ABI >= 7 kernels report it)
	FS     Access // every filesystem right of this ABI
	Net    uint64 // network rights of this ABI
	Scoped uint64 // scopes of this ABI
	// LogFlags reports whether landlock_restrict_self takes the audit
	// logging flags (ABI >= 7).
	LogFlags bool
}

// ErrUnavailable means the kernel has no usable Landlock.
var ErrUnavailable = errors.New("landlock: not supported by this kernel (needs Linux 5.13+ with lsm=landlock)")

// Probe asks the kernel which Landlock ABI it runs. ABIs newer than the
// ones this build knows are treated as the newest known one.
func Probe() (Support, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || abi < 1 {
			return Support{}, ErrUnavailable
		}
		return Support{}, fmt.Errorf("landlock: abi version: %w", err)
	}
	s := Support{ABI: abi}
	if abi > 11 {
		abi = 11
	}
	s.FS = (1 << 13) - 1
	if abi >= 2 {
		s.FS |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		s.FS |= llsys.AccessFSTruncate
	}
	if abi >= 4 {
		s.Net = llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	}
	if abi >= 5 {
		s.FS |= llsys.AccessFSIoctlDev
	}
	if abi >= 6 {
		s.Scoped = llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal
	}
	if abi >= 7 {
		s.LogFlags = true
		if e, err := llsys.LandlockGetErrata(); err == nil {
			s.Errata = e
		}
	}
	if abi >= 9 {
		s.FS |= llsys.AccessFSResolveUnix
	}
	if abi >= 10 {
		s.Net |= llsys.AccessNetBindUDP | llsys.AccessNetConnectSendUDP
	}
	return s, nil
}
