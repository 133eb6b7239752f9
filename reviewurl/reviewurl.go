package reviewurl

import "net/url"

// Check returns "" when s is a model reviewer's endpoint of the form
// every client of sandboxd's accepts, else why not. The reason never
// quotes s, which may hold credentials.
func Check(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "the base URL must be an absolute http or https URL without query or fragment"
	}
	return ""
}

// HasCredentials reports whether s, an endpoint Check accepts, names a
// user or a password.
func HasCredentials(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.User != nil
}

// Host is how sandboxd names the endpoint s to people (in a run's report,
// on the terminal): its host and port, never its user, password, path or
// query; "" when s is not a URL.
func Host(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Host
}
