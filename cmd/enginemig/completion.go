package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

func init() { register(completionCommand) }

// The scripts are urfave/cli v2's autocomplete scripts bound to enginemig: the shell asks the binary
// itself for candidates (--generate-bash-completion), so they stay right as commands and flags change.
const bashCompletion = `# enginemig bash completion: eval "$(enginemig completion bash)"
_enginemig_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if [[ "$cur" == "-"* ]]; then
      opts=$( "${COMP_WORDS[@]:0:$COMP_CWORD}" "${cur}" --generate-bash-completion 2>/dev/null )
    else
      opts=$( "${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null )
    fi
    COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
    return 0
  fi
}
complete -o bashdefault -o default -F _enginemig_bash_autocomplete enginemig
`

const zshCompletion = `#compdef enginemig
# enginemig zsh completion: eval "$(enginemig completion zsh)"
_enginemig_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _enginemig_zsh_autocomplete enginemig
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash or zsh)",
		UsageText: "eval \"$(enginemig completion bash)\"   # in ~/.bashrc\n   eval \"$(enginemig completion zsh)\"    # in ~/.zshrc, after compinit",
		Action: func(c *cli.Context) error {
			switch shell := c.Args().First(); shell {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			default:
				return outcome.Errorf(outcome.Usage, "completion %q: want bash or zsh", shell)
			}
			return nil
		},
	}
}
