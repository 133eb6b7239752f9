module github.com/sandboxd/sandboxd

go 1.26.0

require (
	github.com/landlock-lsm/go-landlock v0.11.2
	github.com/pelletier/go-toml/v2 v2.4.3
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/net v0.50.0
	golang.org/x/sys v0.50.0
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78
)

require golang.org/x/text v0.34.0 // indirect

require (
	github.com/rogpeppe/go-internal v1.16.0
	golang.org/x/tools v0.41.0 // indirect
)
