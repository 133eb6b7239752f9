// Package golden compares test output with files under testdata, and
// rewrites them when the tests run with -update. Only tests import it.
// Of sandboxd's packages it imports none.
package golden
