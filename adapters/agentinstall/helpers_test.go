package agentinstall

import (
	"strconv"

	"github.com/sandboxd/sandboxd/publicerr"
)

func itoa(i int) string { return strconv.Itoa(i) }

// publicMessage is what the CLI prints for err.
func publicMessage(err error) string { return publicerr.Message(err, "an internal error") }
