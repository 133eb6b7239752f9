// Package reviewurl is the one rule for a model reviewer's endpoint: an
// absolute http or https URL with a host, and no query or fragment. The
// model's client (review/openai) holds every endpoint to it; the policy
// file's base_url and the machine configuration's add that no
// credentials may be written there (policy); sandboxd-run, which links no
// model client, checks an endpoint from the environment by it before a
// run starts, as the core's client would.
//
// Of sandboxd's packages it imports none.
package reviewurl
