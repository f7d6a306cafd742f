# SPDX-License-Identifier: MIT
# bash completion for shortcut(1): subcommands, their options, and after
# `shortcut run [options]` the command and its own arguments.  Installed
# as PREFIX/share/bash-completion/completions/shortcut (bash-completion
# loads it on first use); works without bash-completion too (source it).

_shortcut()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmds="run stat stats off on doctor cdi perf config help version"
	local i sub="" subi=0

	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) sub=${COMP_WORDS[i]}; subi=$i; break ;;
		esac
	done
	if [[ -z $sub ]]; then
		COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
		return
	fi
	case $sub in
	run)
		# our options until the command; from the command on, its own
		for ((i = subi + 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--) ((i++)); break ;;
			-*) ;;
			*) break ;;
			esac
		done
		if ((i < COMP_CWORD)); then
			if declare -F _command_offset >/dev/null; then
				_command_offset "$i"
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-v -vv -vvv --off --help --" -- "$cur"))
		else
			COMPREPLY=($(compgen -c -- "$cur"))
		fi
		;;
	stat)
		COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
	stats)
		COMPREPLY=($(compgen -W "--json --prometheus --reset" -- "$cur")) ;;
	off)
		[[ $prev == --wait ]] && return
		COMPREPLY=($(compgen -W "--wait" -- "$cur")) ;;
	doctor)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--json --help" -- "$cur"))
		else
			COMPREPLY=($(compgen -c -- "$cur"))
		fi
		;;
	cdi)
		case $prev in
		--lib | --bin | --output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
		--rundir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
		--name) return ;;
		esac
		COMPREPLY=($(compgen -W "--lib --bin --rundir --name --output --install --help" -- "$cur"))
		;;
	perf)
		local mode=${COMP_WORDS[subi+1]}
		if ((COMP_CWORD == subi + 1)); then
			COMPREPLY=($(compgen -W "pingpong stream devmem" -- "$cur"))
			return
		fi
		case $prev in
		--size | --seconds | --spin-us | --reps) return ;;
		--transports)
			COMPREPLY=($(compgen -W "tcp unix shortcut shm futex memcpy" -- "$cur"))
			return ;;
		esac
		if [[ $mode == devmem ]]; then
			COMPREPLY=($(compgen -W "--size --seconds --reps --spin-us --json" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "--size --seconds --spin-us --reps --json --transports" -- "$cur"))
		fi
		;;
	esac
}
complete -F _shortcut shortcut
