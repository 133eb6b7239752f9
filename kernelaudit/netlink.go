package kernelaudit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Netlink message types of the audit protocol.
const (
	auditGet = 1000 // AUDIT_GET
	auditSet = 1001 // AUDIT_SET
)

// Bits of Status.Mask for Set.
const (
	maskEnabled      = 0x0001 // AUDIT_STATUS_ENABLED
	maskBacklogLimit = 0x0010 // AUDIT_STATUS_BACKLOG_LIMIT
)

// Status is the kernel's struct audit_status.
type Status struct {
	Mask                  uint32
	Enabled               uint32 // 0 off, 1 on, 2 on and locked
	Failure               uint32
	Pid                   uint32 // the audit daemon, if any
	RateLimit             uint32
	BacklogLimit          uint32
	Lost                  uint32
	Backlog               uint32
	FeatureBitmap         uint32
	BacklogWaitTime       uint32
	BacklogWaitTimeActual uint32
}

// ErrPermission means the caller lacks CAP_AUDIT_CONTROL or CAP_AUDIT_READ.
var ErrPermission = errors.New("kernelaudit: not permitted (needs root: CAP_AUDIT_CONTROL and CAP_AUDIT_READ)")

// conn is a unicast control socket.
type conn struct {
	fd  int
	seq atomic.Uint32
}

func dial() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("kernelaudit: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kernelaudit: bind: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &conn{fd: fd}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

func (c *conn) request(typ uint16, flags uint16, payload []byte) (uint32, error) {
	seq := c.seq.Add(1)
	b := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	copy(b[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		if errors.Is(err, unix.EPERM) {
			return 0, ErrPermission
		}
		return 0, fmt.Errorf("kernelaudit: send: %w", err)
	}
	return seq, nil
}

// reply reads messages until one answers seq, returning its type and
// payload; a netlink error message becomes an error.
func (c *conn) reply(seq uint32) (uint16, []byte, error) {
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("kernelaudit: receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, nil, fmt.Errorf("kernelaudit: parse: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			if m.Header.Type == unix.NLMSG_ERROR {
				if len(m.Data) < 4 {
					return 0, nil, errors.New("kernelaudit: short netlink error")
				}
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					if unix.Errno(-code) == unix.EPERM {
						return 0, nil, ErrPermission
					}
					return 0, nil, fmt.Errorf("kernelaudit: %w", unix.Errno(-code))
				}
			}
			return m.Header.Type, m.Data, nil
		}
	}
}

func (c *conn) status() (Status, error) {
	seq, err := c.request(auditGet, unix.NLM_F_REQUEST, nil)
	if err != nil {
		return Status{}, err
	}
	for {
		typ, data, err := c.reply(seq)
		if err != nil {
			return Status{}, err
		}
		if typ == auditGet && len(data) >= int(unsafe.Sizeof(Status{}))-8 {
			var s Status
			copy((*[unsafe.Sizeof(Status{})]byte)(unsafe.Pointer(&s))[:], data)
			return s, nil
		}
	}
}

// set applies the fields named by mask and checks that they took.
func (c *conn) set(mask uint32, want Status) error {
	want.Mask = mask
	payload := (*[unsafe.Sizeof(Status{})]byte)(unsafe.Pointer(&want))[:]
	seq, err := c.request(auditSet, unix.NLM_F_REQUEST|unix.NLM_F_ACK, payload)
	if err != nil {
		return err
	}
	if _, _, err := c.reply(seq); err != nil {
		return err
	}
	got, err := c.status()
	if err != nil {
		return err
	}
	if mask&maskEnabled != 0 && got.Enabled != want.Enabled {
		return fmt.Errorf("kernelaudit: audit enabled is %d, wanted %d", got.Enabled, want.Enabled)
	}
	if mask&maskBacklogLimit != 0 && got.BacklogLimit != want.BacklogLimit {
		return fmt.Errorf("kernelaudit: backlog limit is %d, wanted %d", got.BacklogLimit, want.BacklogLimit)
	}
	return nil
}

// CurrentStatus reads the kernel's audit status.
func CurrentStatus() (Status, error) {
	c, err := dial()
	if err != nil {
		return Status{}, err
	}
	defer c.close()
	return c.status()
}
