package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/broker"
)

const okVerdict = `{"outcome":"allow","risk_level":"low","user_authorization":"high","rationale":"the user asked to install this package"}`

func TestParseVerdictAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		want     broker.Decision
	}{
		{"plain", okVerdict, broker.Decision{Outcome: broker.Allow, RiskLevel: broker.RiskLow, UserAuthorization: broker.AuthHigh, Rationale: "the user asked to install this package", Source: broker.SourceReviewer}},
		{"whitespace and other order", " \n\t{ \"rationale\" : \"writes outside the workspace\",\r\n\"outcome\":\"deny\", \"user_authorization\":\"unknown\", \"risk_level\":\"critical\" }\n\n",
			broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskCritical, UserAuthorization: broker.AuthUnknown, Rationale: "writes outside the workspace", Source: broker.SourceReviewer}},
		{"escapes in the rationale", `{"outcome":"deny","risk_level":"high","user_authorization":"low","rationale":"reads \"~/.ssh\" \u00e9 \/ ok"}`,
			broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskHigh, UserAuthorization: broker.AuthLow, Rationale: `reads "~/.ssh" é / ok`, Source: broker.SourceReviewer}},
		{"high risk allowed with medium authorization", `{"outcome":"allow","risk_level":"high","user_authorization":"medium","rationale":"asked for"}`,
			broker.Decision{Outcome: broker.Allow, RiskLevel: broker.RiskHigh, UserAuthorization: broker.AuthMedium, Rationale: "asked for", Source: broker.SourceReviewer}},
		{"deny at high risk with unknown authorization", `{"outcome":"deny","risk_level":"high","user_authorization":"unknown","rationale":"no"}`,
			broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskHigh, UserAuthorization: broker.AuthUnknown, Rationale: "no", Source: broker.SourceReviewer}},
		{"600 runes", `{"outcome":"deny","risk_level":"low","user_authorization":"low","rationale":"` + strings.Repeat("é", 600) + `"}`,
			broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskLow, UserAuthorization: broker.AuthLow, Rationale: strings.Repeat("é", 600), Source: broker.SourceReviewer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVerdict(tt.in)
			if err != nil {
				t.Fatalf("ParseVerdict: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseVerdictRejects(t *testing.T) {
	member := func(k, v string) string { return fmt.Sprintf("%q:%s", k, v) }
	obj := func(members ...string) string { return "{" + strings.Join(members, ",") + "}" }
	o, r, a, why := member("outcome", `"deny"`), member("risk_level", `"low"`), member("user_authorization", `"low"`), member("rationale", `"because"`)
	withRationale := func(v string) string { return obj(o, r, a, member("rationale", v)) }
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"only whitespace", " \n "},
		{"case-variant duplicate", `{"outcome":"deny","Outcome":"allow","risk_level":"low","user_authorization":"low","rationale":"x"}`},
		{"exact duplicate", `{"outcome":"deny","outcome":"allow","risk_level":"low","user_authorization":"low","rationale":"x"}`},
		{"duplicate rationale", obj(o, r, a, why, why)},
		{"capitalised key", obj(member("Outcome", `"deny"`), r, a, why)},
		{"escaped key", obj(`"\u006futcome":"deny"`, r, a, why)},
		{"unknown key", obj(o, r, a, why, member("grant", `"yes"`))},
		{"missing outcome", obj(r, a, why)},
		{"missing rationale", obj(o, r, a)},
		{"empty object", "{}"},
		{"null value", obj(member("outcome", "null"), r, a, why)},
		{"number value", obj(o, member("risk_level", "1"), a, why)},
		{"bool value", obj(o, r, member("user_authorization", "true"), why)},
		{"nested object", obj(o, r, a, member("rationale", `{"a":"b"}`))},
		{"nested array", obj(member("outcome", `["allow"]`), r, a, why)},
		{"outcome case", obj(member("outcome", `"Allow"`), r, a, why)},
		{"outcome space", obj(member("outcome", `"allow "`), r, a, why)},
		{"outcome other", obj(member("outcome", `"ask"`), r, a, why)},
		{"risk other", obj(o, member("risk_level", `"none"`), a, why)},
		{"authorization other", obj(o, r, member("user_authorization", `"explicit"`), why)},
		{"empty rationale", withRationale(`""`)},
		{"blank rationale", withRationale(`"   "`)},
		{"601 runes", withRationale(`"` + strings.Repeat("é", 601) + `"`)},
		{"NUL in rationale", withRationale(`"a\u0000b"`)},
		{"ESC in rationale", withRationale(`"a\u001b[2Jb"`)},
		{"newline in rationale", withRationale(`"a\nb"`)},
		{"C1 in rationale", withRationale(`"a\u009bb"`)},
		{"bidi override in rationale", withRationale(`"a\u202eb"`)},
		{"line separator in rationale", withRationale(`"a\u2028b"`)},
		{"raw control in string", withRationale("\"a\x01b\"")},
		{"bad escape", withRationale(`"a\qb"`)},
		{"unterminated string", `{"outcome":"deny`},
		{"unclosed object", obj(o, r, a, why)[1:]},
		{"not closed", "{" + o},
		{"trailing comma", "{" + strings.Join([]string{o, r, a, why}, ",") + ",}"},
		{"missing colon", `{"outcome" "deny"}`},
		{"second object", okVerdict + okVerdict},
		{"second object after space", okVerdict + "\n" + okVerdict},
		{"trailing prose", okVerdict + " I hope this helps."},
		{"leading prose", "Here is my verdict: " + okVerdict},
		{"code fence", "```json\n" + okVerdict + "\n```"},
		{"bare fence", "```\n" + okVerdict + "\n```"},
		{"trailing fence", okVerdict + "\n```"},
		{"top-level array", "[" + okVerdict + "]"},
		{"string", `"allow"`},
		{"BOM", "\ufeff" + okVerdict},
		{"NBSP before", "\u00a0" + okVerdict},
		{"invalid UTF-8", withRationale("\"a\xffb\"")},
		{"too large", obj(o, r, a, why) + strings.Repeat(" ", MaxVerdictBytes)},
		{"allow at critical", `{"outcome":"allow","risk_level":"critical","user_authorization":"high","rationale":"x"}`},
		{"allow at high with low authorization", `{"outcome":"allow","risk_level":"high","user_authorization":"low","rationale":"x"}`},
		{"allow at high with unknown authorization", `{"outcome":"allow","risk_level":"high","user_authorization":"unknown","rationale":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseVerdict(tt.in)
			if err == nil {
				t.Fatalf("ParseVerdict(%q) = %+v, want an error", tt.in, d)
			}
			if !errors.Is(err, ErrVerdict) {
				t.Fatalf("error %v does not wrap ErrVerdict", err)
			}
			if d.Outcome != broker.Deny || d.Source != broker.SourceError {
				t.Fatalf("decision with the error = %+v, want a deny from source error", d)
			}
		})
	}
}

func TestParseVerdictInconsistentIsDistinct(t *testing.T) {
	_, err := ParseVerdict(`{"outcome":"allow","risk_level":"critical","user_authorization":"high","rationale":"x"}`)
	if !errors.Is(err, ErrInconsistent) || !errors.Is(err, ErrVerdict) {
		t.Fatalf("err = %v, want ErrInconsistent wrapping ErrVerdict", err)
	}
	_, err = ParseVerdict(`{"outcome":"allow"}`)
	if errors.Is(err, ErrInconsistent) {
		t.Fatalf("a malformed verdict reported as inconsistent: %v", err)
	}
}

func TestConsistent(t *testing.T) {
	risks := []broker.Risk{broker.RiskLow, broker.RiskMedium, broker.RiskHigh, broker.RiskCritical}
	auths := []broker.Authorization{broker.AuthUnknown, broker.AuthLow, broker.AuthMedium, broker.AuthHigh}
	for _, o := range []broker.Outcome{broker.Allow, broker.Deny} {
		for _, r := range risks {
			for _, a := range auths {
				err := Consistent(broker.Decision{Outcome: o, RiskLevel: r, UserAuthorization: a})
				bad := o == broker.Allow && (r == broker.RiskCritical || r == broker.RiskHigh && (a == broker.AuthUnknown || a == broker.AuthLow))
				if (err != nil) != bad {
					t.Errorf("Consistent(%s, %s, %s) = %v, want inconsistent %v", o, r, a, err, bad)
				}
				if err != nil && !errors.Is(err, ErrInconsistent) {
					t.Errorf("error %v does not wrap ErrInconsistent", err)
				}
			}
		}
	}
}

func TestVerdictSchema(t *testing.T) {
	b, err := json.Marshal(VerdictSchema())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type      string   `json:"type"`
			Enum      []string `json:"enum"`
			MaxLength int      `json:"maxLength"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "object" || got.AdditionalProperties == nil || *got.AdditionalProperties || len(got.Required) != 4 || len(got.Properties) != 4 {
		t.Fatalf("schema = %s", b)
	}
	for _, k := range got.Required {
		p, ok := got.Properties[k]
		if !ok || p.Type != "string" {
			t.Fatalf("required %s is not a string property: %s", k, b)
		}
	}
	if got.Properties["rationale"].MaxLength != 0 {
		t.Fatalf("rationale maxLength = %d: OpenAI's strict mode refuses it", got.Properties["rationale"].MaxLength)
	}
	// Every value the schema allows is one ParseVerdict accepts (the
	// consistency rules aside), and the other way round.
	want := map[string]int{"outcome": 2, "risk_level": 4, "user_authorization": 4}
	for k, n := range want {
		if len(got.Properties[k].Enum) != n {
			t.Fatalf("%s enum = %v", k, got.Properties[k].Enum)
		}
		for _, v := range got.Properties[k].Enum {
			m := map[string]string{"outcome": "deny", "risk_level": "low", "user_authorization": "low", "rationale": "x", k: v}
			in, _ := json.Marshal(m)
			if _, err := ParseVerdict(string(in)); err != nil {
				t.Errorf("schema value %s=%s refused: %v", k, v, err)
			}
		}
	}
	// A fresh value each call: changing one does not change the next.
	VerdictSchema()["type"] = "array"
	if VerdictSchema()["type"] != "object" {
		t.Fatal("VerdictSchema returned shared state")
	}
}

func ExampleParseVerdict() {
	d, err := ParseVerdict(`{"outcome":"deny","risk_level":"high","user_authorization":"unknown","rationale":"uploads ~/.aws/credentials to an unknown host"}`)
	fmt.Println(d.Outcome, d.RiskLevel, d.Source, err)
	_, err = ParseVerdict("```json\n{\"outcome\":\"allow\"}\n```")
	fmt.Println(err)
	// Output:
	// deny high reviewer <nil>
	// review: invalid verdict: a code fence around the object
}
