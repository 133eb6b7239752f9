package landlock

import (
	"reflect"
	"testing"
)

// Records as the kernel printed them on these machines (6.18, ABI 7).
func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		typ  int
		text string
		want Record
	}{
		{1423, `audit(1796058993.572:137): domain=13879c2bd blockers=fs.read_file path="/etc/hostname" dev="vda" ino=611`,
			Record{Type: 1423, Serial: 137, Domain: "13879c2bd", Blockers: []string{"fs.read_file"}, Path: "/etc/hostname", Dev: "vda", Ino: 611}},
		{1423, `audit(1796058993.576:138): domain=13879c2bd blockers=fs.make_reg path="/etc" dev="vda" ino=19`,
			Record{Type: 1423, Serial: 138, Domain: "13879c2bd", Blockers: []string{"fs.make_reg"}, Path: "/etc", Dev: "vda", Ino: 19}},
		{1423, `audit(1.2:3): domain=1a blockers=fs.read_file path=2F726F6F742F612062 dev="vda" ino=5`,
			Record{Type: 1423, Serial: 3, Domain: "1a", Blockers: []string{"fs.read_file"}, Path: "/root/a b", Dev: "vda", Ino: 5}},
		{1423, `audit(1.2:4): domain=1a blockers=fs.write_file,fs.truncate path=2F746D702FC3BC dev="vda" ino=6`,
			Record{Type: 1423, Serial: 4, Domain: "1a", Blockers: []string{"fs.write_file", "fs.truncate"}, Path: "/tmp/ü", Dev: "vda", Ino: 6}},
		{1423, `audit(1.2:5): domain=17eae54ed blockers=net.connect_tcp daddr=127.0.0.1 dest=18081`,
			Record{Type: 1423, Serial: 5, Domain: "17eae54ed", Blockers: []string{"net.connect_tcp"}, Daddr: "127.0.0.1", Dest: 18081}},
		{1423, `audit(1.2:6): domain=17eae54ed blockers=scope.signal opid=27690 ocomm="sleep"`,
			Record{Type: 1423, Serial: 6, Domain: "17eae54ed", Blockers: []string{"scope.signal"}, Opid: 27690, Ocomm: "sleep"}},
		{1424, `audit(1796058993.572:134): domain=13879c2bd status=allocated mode=enforcing pid=20240 uid=0 exe="/tmp/auditprobe" comm="auditprobe"`,
			Record{Type: 1424, Serial: 134, Domain: "13879c2bd", Status: "allocated", Pid: 20240}},
		{1424, `audit(1.2:9): domain=13879c2bd status=deallocated denials=12`,
			Record{Type: 1424, Serial: 9, Domain: "13879c2bd", Status: "deallocated", Denials: 12}},
	} {
		got, err := ParseRecord(tc.typ, tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
	}
}

func TestParseRecordRejects(t *testing.T) {
	for _, tc := range []struct {
		typ  int
		text string
	}{
		{1300, `audit(1.2:3): arch=c000003e syscall=257`},
		{1423, `domain=1 blockers=fs.read_file`},
		{1423, `audit(1.2:x): domain=1 blockers=fs.read_file`},
		{1423, `audit(1.2:3): blockers=fs.read_file path="/x"`},
		{1423, `audit(1.2:3): domain=1`},
		{1423, `audit(1.2:3): domain=1 blockers=fs.read_file path="/x`},
		{1423, `audit(1.2:3): domain=1 blockers=fs.read_file path=ZZ`},
		{1423, `audit(1.2:3): domain=1 =x`},
	} {
		if r, err := ParseRecord(tc.typ, tc.text); err == nil {
			t.Errorf("%q parsed: %+v", tc.text, r)
		}
	}
}

// Audit records carry paths a sandboxed command chose: the parser must
// not panic on anything.
func FuzzParseRecord(f *testing.F) {
	f.Add(1423, `audit(1.2:3): domain=1a blockers=fs.read_file path=2F726F6F742F612062 dev="vda" ino=5`)
	f.Add(1424, `audit(1.2:9): domain=13879c2bd status=deallocated denials=12`)
	f.Add(1423, `audit(1.2:5): domain=17eae54ed blockers=net.connect_tcp daddr=127.0.0.1 dest=18081`)
	f.Add(1423, `audit(`)
	f.Fuzz(func(t *testing.T, typ int, text string) {
		r, err := ParseRecord(typ, text)
		if err == nil && (r.Domain == "" || (r.Type != AuditAccess && r.Type != AuditDomain)) {
			t.Fatalf("accepted a record without a domain or of another type: %+v", r)
		}
	})
}
