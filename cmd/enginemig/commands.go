package main

import "github.com/urfave/cli/v2"

// commands lists the subcommands; each lives in its own file (plan.go, apply.go, bench.go, ...).
func commands() []*cli.Command {
	var cmds []*cli.Command
	for _, c := range registered {
		cmds = append(cmds, c())
	}
	return cmds
}

// registered is filled by each command file's init, so files can be added without touching this one.
var registered []func() *cli.Command

func register(c func() *cli.Command) { registered = append(registered, c) }
