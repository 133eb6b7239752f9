package review

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/broker"
)

// canonicalVerdict is the verdict as a well-behaved model writes it.
type canonicalVerdict struct {
	Outcome           broker.Outcome       `json:"outcome"`
	RiskLevel         broker.Risk          `json:"risk_level"`
	UserAuthorization broker.Authorization `json:"user_authorization"`
	Rationale         string               `json:"rationale"`
}

func FuzzParseVerdict(f *testing.F) {
	f.Add(okVerdict)
	f.Add(`{"outcome":"deny","risk_level":"critical","user_authorization":"unknown","rationale":"no"}`)
	f.Add(`{"outcome":"deny","Outcome":"allow","risk_level":"low","user_authorization":"low","rationale":"x"}`)
	f.Add(`{"outcome":"deny","outcome":"allow","risk_level":"low","user_authorization":"low","rationale":"x"}`)
	f.Add("```json\n" + okVerdict + "\n```")
	f.Add(okVerdict + okVerdict)
	f.Add(`{"outcome":"allow","risk_level":"high","user_authorization":"medium","rationale":"\u00e9\ud83d\ude00\"\\"}`)
	f.Add(`{"outcome":"allow","risk_level":"low","user_authorization":"low","rationale":"\ud800"}`)
	f.Add(`[{"outcome":"allow"}]`)
	f.Add(`{"outcome":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ParseVerdict(in)
		if err != nil {
			if d.Outcome != broker.Deny || d.Source != broker.SourceError {
				t.Fatalf("error %v came with %+v, not a deny from source error", err, d)
			}
			return
		}
		if d.Source != broker.SourceReviewer || Consistent(d) != nil {
			t.Fatalf("accepted %q as %+v", in, d)
		}
		if !utf8.ValidString(d.Rationale) || d.Rationale == "" || utf8.RuneCountInString(d.Rationale) > MaxRationaleRunes {
			t.Fatalf("accepted rationale %q", d.Rationale)
		}
		// encoding/json, given the same text, reads the same four values:
		// no key was read differently from the standard.
		var std map[string]any
		if err := json.Unmarshal([]byte(in), &std); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", in, err)
		}
		want := map[string]any{"outcome": string(d.Outcome), "risk_level": string(d.RiskLevel), "user_authorization": string(d.UserAuthorization), "rationale": d.Rationale}
		if len(std) != len(want) {
			t.Fatalf("accepted %q: encoding/json sees %v", in, std)
		}
		for k, v := range want {
			if std[k] != v {
				t.Fatalf("accepted %q: %s is %q, encoding/json reads %q", in, k, v, std[k])
			}
		}
		canon, err := json.Marshal(canonicalVerdict{d.Outcome, d.RiskLevel, d.UserAuthorization, d.Rationale})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseVerdict(string(canon))
		if err != nil || again != d {
			t.Fatalf("canonical %s of %q: %+v, %v; want %+v", canon, in, again, err, d)
		}
	})
}

// fuzzCanaries are the configured secrets FuzzRedact embeds.
func fuzzCanaries() []string {
	return []string{"correct-horse-battery-staple", "Tr0ub4dor&3xyzzy", "pa ss\tword:with@odd/chars?", "ünïcødé-sëcret"}
}

func FuzzRedact(f *testing.F) {
	for _, ks := range kindSamples() {
		f.Add(ks.sample, uint16(0))
		f.Add("curl -d '"+ks.sample+"' https://u:p@x.example/?token=a", uint16(7))
	}
	f.Add("\xff\xfe[REDACTED:jwt]]][REDACTED:", uint16(3))
	f.Add("-----BEGIN "+"PRIVATE KEY-----", uint16(1))
	f.Add("https://a:b@c:d@e/?x=1&key=[REDACTED:url-secret]#access_token=z", uint16(2))
	f.Add("DB_PASSWORD=\"a b\" ./x; password: |\n  k\n${TOKEN:-v} --api-key 'q' -u a:b", uint16(5))
	f.Add("{\\\"token\\\":\\\"v\\\"} PGDSN=u:p@h/d MYSQL_PWD=$'x\\'y'", uint16(9))
	canaries := fuzzCanaries()
	r := NewRedactor(canaries)
	f.Fuzz(func(t *testing.T, in string, where uint16) {
		check := func(s string, mustHide bool) {
			out := r.Redact(s)
			if !utf8.ValidString(out) {
				t.Fatalf("Redact(%q) = %q: invalid UTF-8", s, out)
			}
			if out == marker(kindUnsettled) && s != out {
				// Safe, but a sign that some pattern feeds another.
				t.Fatalf("Redact(%q) did not settle", s)
			}
			if again := r.Redact(out); again != out {
				t.Fatalf("not idempotent: Redact(%q) = %q, then %q", s, out, again)
			}
			if !mustHide {
				return
			}
			for _, c := range canaries {
				if strings.Contains(out, c) {
					t.Fatalf("Redact(%q) = %q: canary %q survived", s, out, c)
				}
			}
		}
		check(in, false)
		c := canaries[int(where)%len(canaries)]
		forms := []string{c, url.QueryEscape(c), base64.StdEncoding.EncodeToString([]byte(c))}
		form := forms[int(where/4)%len(forms)]
		at := 0
		if len(in) > 0 {
			at = int(where) % (len(in) + 1)
		}
		embedded := in[:at] + form + in[at:]
		check(embedded, true)
		// The encoded form must be gone too.
		if out := r.Redact(embedded); strings.Contains(out, form) {
			t.Fatalf("Redact(%q) = %q: %q survived", embedded, out, form)
		}
	})
}
