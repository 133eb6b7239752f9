package boundary

// Surface is what kind of boundary a request crosses.
type Surface string

const (
	// Filesystem: a path and an access right, reviewed after the attempt.
	Filesystem Surface = "filesystem"
	// Network: a destination host:port, decided while its connection
	// waits (it neither triggers nor blocks a retry).
	Network Surface = "network"
	// Command: a whole command judged before it runs (by an agent's hook
	// adapter). Its only operation is OpRun and it is never granted.
	Command Surface = "command"
)

// Valid reports whether s is one of the surfaces above.
func (s Surface) Valid() bool {
	return s == Filesystem || s == Network || s == Command
}

// Operation is what the command tried at a boundary. Filesystem
// operations are named as Landlock's access rights are (and as its audit
// records name them), plus the few the seccomp observer sees that
// Landlock does not restrict (chmod, chown, utime, xattr, rename, link)
// and OpPersist for a write refused at commit.
type Operation string

// Filesystem operations.
const (
	OpReadFile   Operation = "read_file"
	OpReadDir    Operation = "read_dir"
	OpExecute    Operation = "execute"
	OpWriteFile  Operation = "write_file"
	OpTruncate   Operation = "truncate"
	OpIoctlDev   Operation = "ioctl_dev"
	OpMakeReg    Operation = "make_reg"
	OpMakeDir    Operation = "make_dir"
	OpMakeSym    Operation = "make_sym"
	OpMakeFifo   Operation = "make_fifo"
	OpMakeSock   Operation = "make_sock"
	OpMakeChar   Operation = "make_char"
	OpMakeBlock  Operation = "make_block"
	OpRemoveFile Operation = "remove_file"
	OpRemoveDir  Operation = "remove_dir"
	OpRefer      Operation = "refer"
	OpRename     Operation = "rename"
	OpLink       Operation = "link"
	OpChmod      Operation = "chmod"
	OpChown      Operation = "chown"
	OpUtime      Operation = "utime"
	OpXattr      Operation = "xattr"
	// OpPersist is a write the commit refused: a persistence path.
	OpPersist Operation = "persist"
	// OpResolveUnix is a connect to a pathname unix socket that the run
	// did not create (Landlock ABI 9 names the right so); it is never
	// granted.
	OpResolveUnix Operation = "resolve_unix"
)

// Network operations.
const (
	OpConnect Operation = "connect"
	OpBind    Operation = "bind"
)

// Command operations.
const (
	OpRun Operation = "run"
)

// Operations lists every operation of each surface, in a fixed order.
func Operations(s Surface) []Operation {
	switch s {
	case Filesystem:
		return []Operation{OpReadFile, OpReadDir, OpExecute, OpWriteFile, OpTruncate, OpIoctlDev,
			OpMakeReg, OpMakeDir, OpMakeSym, OpMakeFifo, OpMakeSock, OpMakeChar, OpMakeBlock,
			OpRemoveFile, OpRemoveDir, OpRefer, OpRename, OpLink, OpChmod, OpChown, OpUtime, OpXattr, OpPersist, OpResolveUnix}
	case Network:
		return []Operation{OpConnect, OpBind}
	case Command:
		return []Operation{OpRun}
	}
	return nil
}

// Of reports whether op is an operation of surface s.
func (op Operation) Of(s Surface) bool {
	for _, o := range Operations(s) {
		if o == op {
			return true
		}
	}
	return false
}

// Reads reports whether op only reads (nothing it does can persist).
func (op Operation) Reads() bool {
	return op == OpReadFile || op == OpReadDir || op == OpExecute
}
