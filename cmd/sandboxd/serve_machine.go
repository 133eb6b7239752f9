package main

import (
	"errors"
	"flag"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/machine"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
)

// loadMachine reads the machine configuration: path (--config), which
// must exist, else machine.DefaultPath when it does (nil: none).
func loadMachine(path string, log *slog.Logger) (*machine.Config, error) {
	explicit := path != ""
	if !explicit {
		path = machine.DefaultPath
	}
	mc, err := machine.Load(path, explicit, machine.SystemIDs{})
	var pe *policy.Error
	switch {
	case errors.As(err, &pe):
		return nil, publicerr.Wrap(err, pe.Error())
	case err != nil:
		return nil, publicerr.Wrap(err, "the machine configuration "+path+" could not be read")
	case mc == nil:
		log.Info("sandboxd serve: no machine configuration", "file", path)
		return nil, nil
	}
	reviewer := "none"
	if mc.Reviewer != nil {
		reviewer = mc.Reviewer.String() // never its key
	}
	var policyKeys []string
	if mc.Policy != nil {
		policyKeys = mc.Policy.Set.Keys()
	}
	log.Info("sandboxd serve: machine configuration", "file", path, "uids", mc.UIDs, "gids", mc.GIDs,
		"policy", policyKeys, "reviewer", reviewer, "user_reviewers", len(mc.Users), "limits", mc.Limits)
	return mc, nil
}

// newDaemon builds the runner and the daemon from their configurations
// with the machine configuration mc (nil: none) put in. stateDir is the
// daemon's own, root's alone (beside its socket): the caps on the
// operator's reviewers are counted there, per uid. page, when set, makes
// the approvals page over the daemon's question queue.
func newDaemon(mc *machine.Config, fs *flag.FlagSet, stateDir string, sc session.Config, dc daemon.Config,
	page func(*daemon.Questions) (daemon.Page, error)) (*daemon.Daemon, error) {
	withMachine(mc, fs, stateDir, &sc, &dc)
	if page != nil {
		dc.Questions = daemon.NewQuestions(dc.QuestionWait, dc.MaxQuestions)
		p, err := page(dc.Questions)
		if err != nil {
			return nil, err
		}
		dc.Page = p
	}
	dc.Runner = session.New(sc)
	return daemon.New(dc), nil
}

// withMachine puts the machine configuration mc (nil: none) into the
// runner's and the daemon's configurations. Its limits replace the
// daemon's defaults; a flag given on the command line (--max-execs)
// still wins, as the person starting the daemon asked.
func withMachine(mc *machine.Config, fs *flag.FlagSet, stateDir string, sc *session.Config, dc *daemon.Config) {
	if mc == nil {
		return
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	dc.Allow = mc.Allows
	if l := mc.Limits; l.MaxExecs > 0 && !set["max-execs"] {
		dc.MaxExecs = l.MaxExecs
	}
	dc.MaxQuestions = mc.Limits.MaxQuestions
	sc.MaxHeld, sc.MaxHeldBytes = mc.Limits.MaxHeld, mc.Limits.MaxHeldBytes
	sc.MachinePolicy = mc.Policy
	meters := filepath.Join(stateDir, "meters")
	sc.MachineReviewer = func(uid int) (session.MachineModel, bool) {
		r, ok := mc.ReviewerFor(uid)
		return session.MachineModel{Model: r.Model, BaseURL: r.BaseURL, Key: r.Key,
			MeterDir: filepath.Join(meters, strconv.Itoa(uid))}, ok
	}
}
