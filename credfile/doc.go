// Package credfile turns a configuration file that mixes settings and
// credentials into a copy with the credentials removed, so a sandboxed
// tool can read its settings while the original stays unreadable. It
// keeps only what it recognises as a setting: anything it cannot parse,
// every comment, and every entry that names or carries a credential is
// left out.
//
// Of sandboxd's packages it imports none.
package credfile
