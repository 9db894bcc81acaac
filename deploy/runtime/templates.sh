#!/usr/bin/env bash
# templates.sh list | require <name>: publishes the templates (the templates folder's and
# AWP_TEMPLATES_SOURCE's, common.sh) to the templates repository, then prints the names this
# gateway knows, one a line (list), or checks that <name> is one of them (require): the runner's
# first step of a provision from a template, so an unknown name fails before the runtime is
# called, listing the known ones.
. "$(dirname "$0")/common.sh"
case ${1:-} in
  list)
    [[ $# -eq 1 ]] || die "usage: templates.sh list | require <name>"
    publish_templates
    known_templates
    ;;
  require)
    [[ $# -eq 2 ]] || die "usage: templates.sh require <name>"
    template_name_ok "$2" || die "provision: unsafe template name: $2"
    publish_templates
    known=$(known_templates)
    if ! grep -qxF -- "$2" <<<"$known"; then
      list=$(paste -sd ',' <<<"$known" | sed 's/,/, /g')
      die "provision: template \"$2\" does not exist on this gateway; known templates: ${list:-none} (templates folder $TEMPLATES${TEMPLATES_SOURCE:+, source $TEMPLATES_SOURCE})"
    fi
    echo "template $2: $(git_ --git-dir="$TEMPLATES_REPO" rev-parse --short "refs/heads/template/$2")"
    ;;
  *) die "usage: templates.sh list | require <name>" ;;
esac
