package review

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each cap refuses on its own and says which it is; a session's hourly
// caps count only its own calls, the user's ceiling counts every
// session's; Room answers what Reserve then does.
func TestMeterCaps(t *testing.T) {
	const big = int64(1 << 40)
	loose := Caps{CallsPerSession: big, CallsPerHour: big, TokensPerSession: big, TokensPerHour: big, UserCallsPerHour: big, UserTokensPerHour: big}
	with := func(f func(*Caps)) Caps { c := loose; f(&c); return c }
	type call struct {
		session string
		tokens  int64
	}
	for _, tc := range []struct {
		name  string
		caps  Caps
		prior []call
		try   call
		want  string // the policy key of the cap that refuses; "" = fits
	}{
		{"fits", loose, []call{{"a", 10}, {"b", 10}}, call{"a", 10}, ""},
		{"session calls", with(func(c *Caps) { c.CallsPerSession = 2 }), []call{{"a", 1}, {"a", 1}}, call{"a", 1}, "max_calls_per_session"},
		{"session calls, other session", with(func(c *Caps) { c.CallsPerSession = 2 }), []call{{"a", 1}, {"a", 1}}, call{"b", 1}, ""},
		{"session hourly calls", with(func(c *Caps) { c.CallsPerHour = 2 }), []call{{"a", 1}, {"a", 1}}, call{"a", 1}, "max_calls_per_hour"},
		{"another session's hour is not mine", with(func(c *Caps) { c.CallsPerHour = 2 }), []call{{"a", 1}, {"a", 1}, {"b", 1}}, call{"b", 1}, ""},
		{"user ceiling calls", with(func(c *Caps) { c.CallsPerHour = 2; c.UserCallsPerHour = 3 }), []call{{"a", 1}, {"a", 1}, {"b", 1}}, call{"c", 1}, "max_user_calls_per_hour"},
		{"session tokens", with(func(c *Caps) { c.TokensPerSession = 100 }), []call{{"a", 60}}, call{"a", 41}, "max_tokens_per_session"},
		{"session tokens exactly", with(func(c *Caps) { c.TokensPerSession = 100 }), []call{{"a", 60}}, call{"a", 40}, ""},
		{"session hourly tokens", with(func(c *Caps) { c.TokensPerHour = 100 }), []call{{"a", 60}, {"b", 60}}, call{"a", 41}, "max_tokens_per_hour"},
		{"session hourly tokens, own only", with(func(c *Caps) { c.TokensPerHour = 100 }), []call{{"a", 60}, {"b", 60}}, call{"a", 40}, ""},
		{"user ceiling tokens", with(func(c *Caps) { c.UserTokensPerHour = 100 }), []call{{"a", 60}, {"b", 30}}, call{"c", 11}, "max_user_tokens_per_hour"},
		{"zero allows none", with(func(c *Caps) { c.UserCallsPerHour = 0 }), nil, call{"a", 1}, "max_user_calls_per_hour"},
		{"the session's own cap first", with(func(c *Caps) { c.CallsPerSession = 1; c.CallsPerHour = 1; c.UserCallsPerHour = 1 }), []call{{"a", 1}}, call{"a", 1}, "max_calls_per_session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Meter{Dir: t.TempDir(), Caps: loose, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
			for _, c := range tc.prior {
				if _, err := m.Reserve(c.session, c.tokens); err != nil {
					t.Fatalf("prior call: %v", err)
				}
			}
			m.Caps = tc.caps
			room := m.Room(tc.try.session, 1, tc.try.tokens)
			_, err := m.Reserve(tc.try.session, tc.try.tokens)
			if room != (err == nil) {
				t.Errorf("Room said %v, Reserve %v", room, err)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrCapped) || !strings.HasSuffix(capWhy(err), "(review."+tc.want+")")):
				t.Fatalf("got %v, want the %s cap", err, tc.want)
			}
		})
	}
}

// Room for several calls counts them all, as Reserve would one by one.
func TestMeterRoomForSeveral(t *testing.T) {
	m := &Meter{Dir: t.TempDir(), Caps: Caps{CallsPerSession: 10, CallsPerHour: 4, TokensPerSession: 1000, TokensPerHour: 1000,
		UserCallsPerHour: 5, UserTokensPerHour: 1000}}
	if _, err := m.Reserve("other", 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		calls int64
		want  bool
	}{{4, true}, {5, false}} { // 4 fit both; 5 pass the session's hourly 4 (and the ceiling's 5 with other's call)
		if got := m.Room("s", tc.calls, 10); got != tc.want {
			t.Errorf("Room(%d) = %v", tc.calls, got)
		}
	}
}

// A usage file written before the hourly caps were per session still
// loads: its calls name no session, so they count toward the user's
// ceiling and toward no session's hourly cap. An unreadable one refuses
// every call (fail closed), as before.
func TestMeterUsageFile(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	legacy := `{"sessions":{"uid 0: s":{"calls":2,"tokens":200,"last":1800000000}},` +
		`"hours":[{"at":1799999990,"tokens":100,"id":1},{"at":1799999995,"tokens":100,"id":2}],"next":2}`
	for _, tc := range []struct {
		name    string
		content string
		caps    Caps
		session string
		want    string // "" fits; a policy key; "unreadable"
	}{
		{"legacy: not this session's hour", legacy, Caps{CallsPerSession: 10, CallsPerHour: 1, TokensPerSession: 1000, TokensPerHour: 1000, UserCallsPerHour: 10, UserTokensPerHour: 1000}, "uid 0: s", ""},
		{"legacy: the user's hour", legacy, Caps{CallsPerSession: 10, CallsPerHour: 10, TokensPerSession: 1000, TokensPerHour: 1000, UserCallsPerHour: 2, UserTokensPerHour: 1000}, "uid 0: t", "max_user_calls_per_hour"},
		{"legacy: the session's life", legacy, Caps{CallsPerSession: 2, CallsPerHour: 10, TokensPerSession: 1000, TokensPerHour: 1000, UserCallsPerHour: 10, UserTokensPerHour: 1000}, "uid 0: s", "max_calls_per_session"},
		{"unreadable", `{"sessions": [`, Caps{CallsPerSession: 10, CallsPerHour: 10, TokensPerSession: 1000, TokensPerHour: 1000, UserCallsPerHour: 10, UserTokensPerHour: 1000}, "uid 0: s", "unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "review"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "review", "usage.json"), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			m := &Meter{Dir: dir, Caps: tc.caps, Now: func() time.Time { return now }}
			room := m.Room(tc.session, 1, 10)
			_, err := m.Reserve(tc.session, 10)
			switch tc.want {
			case "":
				if err != nil || !room {
					t.Fatalf("refused: %v (room %v)", err, room)
				}
			case "unreadable":
				if err == nil || errors.Is(err, ErrCapped) || room {
					t.Fatalf("an unreadable usage file let a call through or passed for a cap: %v (room %v)", err, room)
				}
			default:
				if !errors.Is(err, ErrCapped) || !strings.HasSuffix(capWhy(err), "(review."+tc.want+")") || room {
					t.Fatalf("got %v (room %v), want the %s cap", err, room, tc.want)
				}
			}
		})
	}
}

// The sentence names the cap, its limit and its unit, in the singular
// for one.
func TestCapSentences(t *testing.T) {
	for _, tc := range []struct {
		caps Caps
		want string
	}{
		{Caps{CallsPerSession: 9, CallsPerHour: 1, TokensPerSession: 9, TokensPerHour: 9, UserCallsPerHour: 9, UserTokensPerHour: 9},
			"this session's hourly cap of 1 model call is reached (review.max_calls_per_hour)"},
		{Caps{CallsPerSession: 9, CallsPerHour: 9, TokensPerSession: 9, TokensPerHour: 9, UserCallsPerHour: 0, UserTokensPerHour: 9},
			"your hourly ceiling of 0 model calls, every session together, is reached (review.max_user_calls_per_hour)"},
		{Caps{CallsPerSession: 9, CallsPerHour: 9, TokensPerSession: 1, TokensPerHour: 9, UserCallsPerHour: 9, UserTokensPerHour: 9},
			"this session's cap of 1 token is reached (review.max_tokens_per_session)"},
		{Caps{CallsPerSession: 9, CallsPerHour: 9, TokensPerSession: 9, TokensPerHour: 9, UserCallsPerHour: 9, UserTokensPerHour: 4},
			"your hourly ceiling of 4 tokens, every session together, is reached (review.max_user_tokens_per_hour)"},
	} {
		err := tc.caps.check(counts{Calls: 1}, window{calls: 1, tokens: 1}, window{calls: 1, tokens: 1}, 1, 4)
		if got := capWhy(err); !errors.Is(err, ErrCapped) || got != tc.want {
			t.Errorf("got %q (%v), want %q", got, err, tc.want)
		}
	}
}
