package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/kernelaudit"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

// Check is one line of `sandboxd doctor`.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Diagnosis is what `sandboxd doctor` found.
type Diagnosis struct {
	Checks      []Check   `json:"checks"`
	Isolation   Isolation `json:"isolation"`    // what `run` gets
	NetworkMode string    `json:"network_mode"` // what `run` gets
	Degraded    []string  `json:"degraded"`     // why `run` would be weaker than full isolation
	Refuses     string    `json:"refuses,omitempty"`
}

// Doctor probes the kernel and the environment the way Run would use them
// for the caller uid and gid, with helper as Run's Spec.Helper (nil: this
// process's own executable): the namespace probe runs through it.
func Doctor(uid, gid int, stateDir string, helper *os.File) Diagnosis {
	var d Diagnosis
	add := d.add
	var uts unix.Utsname
	unix.Uname(&uts)
	add("kernel", true, "%s %s", unix.ByteSliceToString(uts.Sysname[:]), unix.ByteSliceToString(uts.Release[:]))
	root := uid == 0
	add("caller", true, "uid %d%s", uid, map[bool]string{true: " (root: the command runs as an unprivileged host uid through a user namespace)", false: ""}[root])

	d.checkLandlock()

	if _, err := seccomp.Compile(seccomp.Build(seccomp.Options{})); err != nil {
		add("seccomp", false, "the system call filter cannot be compiled (%s)", publicerr.Reason(err))
		d.Refuses = "the system call filter cannot be built"
	} else {
		actions, _ := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
		add("seccomp", true, "filter compiles (libseccomp); kernel actions: %s", strings.TrimSpace(string(actions)))
	}

	add("audit", auditReachable(), "%s", auditDetail())

	nsErr, layerErr, captureErr := probeNamespaces(root, uid, gid, stateDir, helper)
	if errors.Is(nsErr, errSkew) {
		// Every run would fail the same way: nothing else matters.
		add("helper build", false, "%s", wire.Skew)
		d.Refuses = "the sandbox helper is of another build than this sandboxd"
		return d
	}
	if nsErr != nil {
		add("namespaces", false, "user, mount, pid, network, IPC and UTS namespaces: %s", publicerr.Message(nsErr, "a process cannot be started in them ("+publicerr.Reason(nsErr)+")"))
	} else {
		add("namespaces", true, "user, mount, pid, network, IPC and UTS namespaces work")
		if root {
			add("id-mapped mounts", true, "the workspace can be mapped to the command's unprivileged host uid")
		}
		if layerErr != nil {
			add("copy-on-write layer", false, "%v; runs write straight to the workspace and a retry runs over the first attempt's effects", layerErr)
			d.Degraded = append(d.Degraded, "no copy-on-write layer: "+layerErr.Error())
		} else {
			add("copy-on-write layer", true, "overlayfs (userxattr) over a size-limited tmpfs mounts in the sandbox's user namespace: attempts are transactional")
		}
	}

	cg := probeCgroups()
	version := "v1"
	if cg.V2 {
		version = "v2"
	}
	if cg.PidsDir == "" {
		add("cgroups", false, "%s: %s; fork bombs are bounded by RLIMIT_NPROC, and memory by RLIMIT_DATA per process, with /tmp, /dev/shm and the layer held within limits.memory together; the processes together are not bounded", version, cg.Reason)
		d.Degraded = append(d.Degraded, "no pids cgroup: "+cg.Reason)
	} else {
		mem := "memory controller unavailable: RLIMIT_DATA bounds each process, /tmp, /dev/shm and the layer are held within limits.memory together, and the processes together are not bounded"
		if cg.MemoryDir != "" || cg.V2 {
			mem = "memory controller available"
		}
		add("cgroups", true, "%s: pids controller under %s; %s", version, cg.PidsDir, mem)
	}

	switch {
	case nsErr == nil:
		d.Isolation, d.NetworkMode = Namespaces, string(NetNS)
		add("egress", true, "each run's proxy listens on its own network namespace's loopback; every destination is decided while its connection waits")
		if captureErr != nil {
			add("capture", false, "%v; only tools that use the proxy variables or SOCKS5 reach the network, and a connect straight to an address is refused and reported", captureErr)
			d.Degraded = append(d.Degraded, "no capture of direct connects: "+captureErr.Error())
		} else {
			add("capture", true, "nf_tables TPROXY in the run's namespace: a connect straight to an address goes through the proxy's decision, and names resolve through the run's stub resolver")
		}
	case root:
		d.Refuses = "namespaces are unavailable and the caller is root; sandboxd will not run a command as host root"
	default:
		d.Isolation, d.NetworkMode = LandlockOnly, string(NetLandlock)
		d.Degraded = append(d.Degraded, "no namespaces: run uses isolation landlock-only (no private /tmp, /proc or /dev; no pid namespace; TCP closed by Landlock, loopback servers cannot listen; no egress: the proxy needs a network namespace)")
	}
	return d
}

func (d *Diagnosis) add(name string, ok bool, format string, args ...any) {
	d.Checks = append(d.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// checkLandlock reports the Landlock ABI and what it lacks.
func (d *Diagnosis) checkLandlock() {
	sup, err := landlock.Probe()
	if err != nil {
		why := "the kernel's Landlock ABI cannot be read (" + publicerr.Reason(err) + ")"
		if errors.Is(err, landlock.ErrUnavailable) {
			why = "not supported by this kernel (needs Linux 5.13+ with lsm=landlock)"
		}
		d.add("landlock", false, "%s", why)
		d.Refuses = "Landlock is unavailable; sandboxd cannot enforce its policy on this kernel"
		return
	}
	detail := fmt.Sprintf("ABI %d, errata 0x%x", sup.ABI, sup.Errata)
	if sup.ABI < 6 {
		detail += "; no abstract-socket or signal scoping (needs ABI 6)"
		d.Degraded = append(d.Degraded, "Landlock ABI < 6: no abstract unix socket or signal scoping")
	}
	if sup.ABI < 4 {
		detail += "; no TCP rules (needs ABI 4)"
	}
	if !sup.LogFlags {
		detail += "; no audit logging flags (needs ABI 7), boundaries are detected less exactly"
	}
	d.add("landlock", sup.ABI >= 6, "%s", detail)
}

func auditReachable() bool {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}) == nil
}

func auditDetail() string {
	if auditReachable() {
		st, err := kernelaudit.CurrentStatus()
		state := "unknown"
		if err == nil {
			state = fmt.Sprintf("enabled=%d backlog_limit=%d", st.Enabled, st.BacklogLimit)
		}
		return "NETLINK_AUDIT multicast can be joined: Landlock denials are read exactly; run turns kernel audit on while it runs and restores it (now " + state + "); " +
			"sandboxd serve --keep-audit-on keeps it on between commands instead: ~0.4 ms less per command, and meanwhile the machine's other audit records (logins, other programs' denials) are made, read by the daemon and, with no audit daemon, written to the kernel log"
	}
	return "NETLINK_AUDIT multicast cannot be joined (needs CAP_AUDIT_READ); boundary detection would rely on seccomp notification"
}

// errSkew is the probe's word that it is of another build (wire.Skew).
var errSkew = errors.New("sandbox: the helper is of another build")

// probeNamespaces starts a process in the namespaces Run uses and, for a
// root caller, tries an id-mapped mount with its user namespace.
// probeNamespaces starts a child in the sandbox's namespaces, which also
// mounts a copy-on-write layer in its own mount namespace; the second
// error is the layer's.
func probeNamespaces(root bool, uid, gid int, stateDir string, helper *os.File) (nsErr, layerErr, captureErr error) {
	hostUID, hostGID := uid, gid
	if root {
		hostUID, hostGID = defaultHostID, defaultHostID
	}
	dir := stateDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		dir = "/"
	}
	// The layer is probed over a tmpfs on /tmp in the child's own mount
	// namespace, which dies with it.
	// The probe is the helper a run would start, told this build's stamp.
	cmd := exec.Command(helperPath(helper), wire.ProbeArg, "/tmp", wire.Stamp())
	cmd.Env, cmd.Dir = []string{}, "/"
	var probeOut strings.Builder
	cmd.Stdout = &probeOut
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: hostUID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: hostGID, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE},
		Credential:                 &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err, nil, nil
	}
	if err := cmd.Start(); err != nil {
		return err, nil, nil
	}
	if err := sameBinary(cmd.Process.Pid, helper); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err, nil, nil
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
		lines := strings.SplitN(probeOut.String(), "\n", 3)
		if strings.TrimSpace(lines[0]) == wire.Skew {
			nsErr, layerErr, captureErr = errSkew, nil, nil
		}
		if nsErr != nil {
			return
		}
		for len(lines) < 2 {
			lines = append(lines, "the probe said nothing")
		}
		if msg := strings.TrimSpace(lines[0]); layerErr == nil && msg != "ok" {
			layerErr = publicerr.New(msg)
		}
		if msg := strings.TrimSpace(lines[1]); msg != "ok" {
			captureErr = publicerr.New(msg)
		}
	}()
	if !root {
		return nil, nil, nil
	}
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return publicerr.Errorf(err, "the probe's user namespace cannot be opened (%s)", publicerr.Reason(err)), nil, nil
	}
	defer unix.Close(userns)
	fd, err := idmappedTree(dir, userns, true)
	if err != nil {
		return publicerr.Errorf(err, "an id-mapped mount of the state directory cannot be made (%s)", publicerr.Reason(err)), nil, nil
	}
	unix.Close(fd)
	return nil, nil, nil
}
