module github.com/enginemig/enginemig

go 1.26.8

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/urfave/cli/v2 v2.27.7
	golang.org/x/term v0.44.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/sys v0.46.0 // indirect
)
