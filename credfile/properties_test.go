package credfile

import (
	"strings"
	"testing"
)

func TestGradleProperties(t *testing.T) {
	in := "# CANARY0 in a comment\r\n" +
		"org.gradle.jvmargs=-Xmx2g \\\n    -Dfile.encoding=UTF-8\n" +
		"org.gradle.caching = true\n" +
		"android.useAndroidX: true\n" +
		"mavenCentralUsername=CANARY1\n" +
		"mavenCentralPassword=CANARY2\n" +
		"signing.keyId=CANARY3\n" +
		"signing.password=CANARY4\n" +
		"signing.secretKeyRingFile=/home/u/CANARY5.gpg\n" +
		"systemProp.https.proxyUser=CANARY6\n" +
		"systemProp.https.proxyPassword=CANARY7\n" +
		"artifactoryUrl=https://u:CANARY8@repo.example/\n" +
		"gpr.token=CANARY9\n" +
		"harmless=1 \\\n  mavenPassword=CANARY10\n" +
		"weird\\u0050assword=CANARY11\n" +
		"a value only CANARY12\n" +
		"! CANARY13 \\\n" +
		"org.gradle.parallel=true\n" +
		"myApiKey=CANARY14\n" +
		"ghToken CANARY15\n"
	got := string(GradleProperties([]byte(in)))
	if strings.Contains(got, "CANARY") {
		t.Errorf("a credential was kept:\n%s", got)
	}
	want := "org.gradle.jvmargs=-Xmx2g -Dfile.encoding=UTF-8\norg.gradle.caching=true\nandroid.useAndroidX=true\norg.gradle.parallel=true\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func FuzzGradleProperties(f *testing.F) {
	f.Add([]byte("a=b\nsigning.password=x\n"))
	f.Add([]byte("a=b \\\r\n c\\\\\nd:e\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := GradleProperties(data)
		if again := GradleProperties(out); string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q", out, again)
		}
		// Every logical line kept is one plain, harmless entry.
		for _, line := range propertiesLines(string(out)) {
			key, value, _ := strings.Cut(line, "=")
			if !propertyKey.MatchString(key) || propertySecret(key) || secretValue(value) {
				t.Fatalf("kept %q", line)
			}
		}
	})
}
