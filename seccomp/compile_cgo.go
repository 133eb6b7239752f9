//go:build linux && cgo

package seccomp

import (
	"fmt"
	"io"
	"os"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile turns rules into a classic BPF program for x86_64 with libseccomp.
// Calls from any other architecture (int 0x80, x32) kill the process.
func Compile(r Rules) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := checkArch(); err != nil {
		return nil, err
	}
	f, err := libseccomp.NewFilter(libseccomp.ActErrno.SetReturnCode(int16(DefaultErrno)))
	if err != nil {
		return nil, fmt.Errorf("seccomp: new filter: %w", err)
	}
	defer f.Release()
	if err := configure(f); err != nil {
		return nil, err
	}
	for _, rule := range r.List {
		if err := addRule(f, rule); err != nil {
			return nil, err
		}
	}
	return export(f)
}

// checkArch fails unless the native architecture is x86_64, the only one
// the rules are written for.
func checkArch() error {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return fmt.Errorf("seccomp: native arch: %w", err)
	}
	if native != libseccomp.ArchAMD64 {
		return fmt.Errorf("seccomp: unsupported architecture %s (x86_64 only)", native)
	}
	return nil
}

// configure sets the filter's attributes.
func configure(f *libseccomp.ScmpFilter) error {
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return fmt.Errorf("seccomp: bad arch action: %w", err)
	}
	// The helper sets no_new_privs itself, on every thread, before loading.
	if err := f.SetNoNewPrivsBit(false); err != nil {
		return fmt.Errorf("seccomp: nnp bit: %w", err)
	}
	// A binary tree keeps the per-call cost flat with ~350 rules.
	if err := f.SetOptimize(2); err != nil {
		return fmt.Errorf("seccomp: optimize: %w", err)
	}
	return nil
}

// addRule adds one rule to f.
func addRule(f *libseccomp.ScmpFilter, rule Rule) error {
	if rule.Action == Errno && rule.Errno == DefaultErrno {
		// Already the default; listed in Rules so readers see the choice.
		return nil
	}
	act := libseccomp.ActAllow
	switch rule.Action {
	case Errno:
		act = libseccomp.ActErrno.SetReturnCode(int16(rule.Errno))
	case Notify:
		act = libseccomp.ActNotify
	}
	call := libseccomp.ScmpSyscall(rule.Nr)
	if len(rule.Conds) == 0 {
		if err := f.AddRuleExact(call, act); err != nil {
			return fmt.Errorf("seccomp: rule %d: %w", rule.Nr, err)
		}
		return nil
	}
	conds, err := conditions(rule)
	if err != nil {
		return err
	}
	if err := f.AddRuleConditionalExact(call, act, conds); err != nil {
		return fmt.Errorf("seccomp: rule %d (%s): %w", rule.Nr, rule.Name, err)
	}
	return nil
}

// conditions are rule's argument checks in libseccomp's terms.
func conditions(rule Rule) ([]libseccomp.ScmpCondition, error) {
	conds := make([]libseccomp.ScmpCondition, 0, len(rule.Conds))
	for _, c := range rule.Conds {
		var cond libseccomp.ScmpCondition
		var err error
		switch c.Op {
		case Eq:
			cond, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareEqual, c.Value)
		case Ne:
			cond, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareNotEqual, c.Value)
		case Ge:
			cond, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareGreaterEqual, c.Value)
		case MaskedEq:
			cond, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareMaskedEqual, c.Mask, c.Value)
		default:
			err = fmt.Errorf("unknown op %d", c.Op)
		}
		if err != nil {
			return nil, fmt.Errorf("seccomp: rule %d condition: %w", rule.Nr, err)
		}
		conds = append(conds, cond)
	}
	return conds, nil
}

// export returns f's program.
func export(f *libseccomp.ScmpFilter) ([]byte, error) {
	// libseccomp 2.5 can only export to a file descriptor.
	fd, err := unix.MemfdCreate("sandboxd-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp: memfd: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "sandboxd-seccomp")
	defer mf.Close()
	if err := f.ExportBPF(mf); err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	if _, err := mf.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	prog, err := io.ReadAll(mf)
	if err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, fmt.Errorf("seccomp: export: program of %d bytes", len(prog))
	}
	return prog, nil
}
