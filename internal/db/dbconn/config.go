// Package dbconn turns MySQL-client-style connection settings (flags, option files, environment)
// into driver connections, and keeps the password out of every string it produces.
package dbconn

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Secret holds a password. Its String, GoString and JSON forms never reveal the value, so a
// Config can be logged or marshalled without leaking it.
type Secret string

func (Secret) String() string                  { return "*****" }
func (Secret) GoString() string                { return `"*****"` }
func (Secret) MarshalJSON() ([]byte, error)    { return []byte(`"*****"`), nil }
func (s Secret) Reveal() string                { return string(s) }
func (Secret) MarshalText() ([]byte, error)    { return []byte("*****"), nil }
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

// SSL modes, as in the mysql client's --ssl-mode.
const (
	SSLDisabled       = "DISABLED"
	SSLPreferred      = "PREFERRED"
	SSLRequired       = "REQUIRED"
	SSLVerifyCA       = "VERIFY_CA"
	SSLVerifyIdentity = "VERIFY_IDENTITY"
)

// Config is where and how to connect. Zero fields mean "not given" so that sources can be layered.
type Config struct {
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Socket   string `json:"socket,omitempty"`
	User     string `json:"user,omitempty"`
	Password Secret `json:"-"`
	// PasswordSet distinguishes an empty password from none given.
	PasswordSet bool   `json:"-"`
	SSLMode     string `json:"ssl_mode,omitempty"`
	SSLCA       string `json:"ssl_ca,omitempty"`
	SSLCert     string `json:"ssl_cert,omitempty"`
	SSLKey      string `json:"ssl_key,omitempty"`
}

// Merge fills fields that c leaves empty from lower-priority settings o.
func (c Config) Merge(o Config) Config {
	if c.Host == "" {
		c.Host = o.Host
	}
	if c.Port == 0 {
		c.Port = o.Port
	}
	if c.Socket == "" {
		c.Socket = o.Socket
	}
	if c.User == "" {
		c.User = o.User
	}
	if !c.PasswordSet && o.PasswordSet {
		c.Password, c.PasswordSet = o.Password, true
	}
	if c.SSLMode == "" {
		c.SSLMode = o.SSLMode
	}
	if c.SSLCA == "" {
		c.SSLCA = o.SSLCA
	}
	if c.SSLCert == "" {
		c.SSLCert = o.SSLCert
	}
	if c.SSLKey == "" {
		c.SSLKey = o.SSLKey
	}
	return c
}

// Resolve layers the sources the way MySQL clients do, highest priority first: explicit flags,
// the password environment variables (ENGINEMIG_PASSWORD, then MYSQL_PWD), the --defaults-file
// (or, without it, ~/.my.cnf), then built-in defaults (localhost:3306 as the current OS user).
func Resolve(flags Config, defaultsFile string, getenv func(string) string) (Config, error) {
	c := flags
	for _, name := range []string{"ENGINEMIG_PASSWORD", "MYSQL_PWD"} {
		if v, ok := lookupEnv(getenv, name); ok && !c.PasswordSet {
			c.Password, c.PasswordSet = Secret(v), true
		}
	}
	file := defaultsFile
	mustExist := file != ""
	if file == "" {
		if home := getenv("HOME"); home != "" {
			file = filepath.Join(home, ".my.cnf")
		}
	}
	if file != "" {
		fromFile, err := ReadOptionFile(file)
		if err != nil && (mustExist || !errors.Is(err, os.ErrNotExist)) {
			return Config{}, err
		}
		c = c.Merge(fromFile)
	}
	def := Config{Host: "localhost", Port: 3306, User: getenv("USER")}
	if def.User == "" {
		def.User = "root"
	}
	c = c.Merge(def)
	if c.SSLMode == "" {
		c.SSLMode = SSLPreferred
	}
	c.SSLMode = strings.ToUpper(strings.ReplaceAll(c.SSLMode, "-", "_"))
	switch c.SSLMode {
	case SSLDisabled, SSLPreferred, SSLRequired, SSLVerifyCA, SSLVerifyIdentity:
	default:
		return Config{}, fmt.Errorf("--ssl-mode %q: use DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY", c.SSLMode)
	}
	if (c.SSLMode == SSLVerifyCA || c.SSLMode == SSLVerifyIdentity) && c.SSLCA == "" {
		return Config{}, fmt.Errorf("--ssl-mode %s needs --ssl-ca", c.SSLMode)
	}
	return c, nil
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	if getenv == nil {
		return "", false
	}
	v := getenv(name)
	return v, v != ""
}

// ReadOptionFile reads the [client], [mysql] and [enginemig] groups of a MySQL option file
// (later groups win). It understands quoted values, comments and !include/!includedir.
func ReadOptionFile(path string) (Config, error) {
	values := map[string]string{}
	if err := readOptionFile(path, values, 0); err != nil {
		return Config{}, err
	}
	var c Config
	c.Host = values["host"]
	c.Socket = values["socket"]
	c.User = values["user"]
	if p, ok := values["password"]; ok {
		c.Password, c.PasswordSet = Secret(p), true
	}
	if p := values["port"]; p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Config{}, fmt.Errorf("option file %s: port %q is not a number", path, p)
		}
		c.Port = n
	}
	c.SSLMode = values["ssl-mode"]
	c.SSLCA = values["ssl-ca"]
	c.SSLCert = values["ssl-cert"]
	c.SSLKey = values["ssl-key"]
	return c, nil
}

func readOptionFile(path string, values map[string]string, depth int) error {
	if depth > 5 {
		return fmt.Errorf("option file %s: !include nested too deep", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("option file: %w", err)
	}
	defer f.Close()
	group := ""
	sc := bufio.NewScanner(f)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case strings.HasPrefix(line, "!includedir"):
			dir := strings.TrimSpace(strings.TrimPrefix(line, "!includedir"))
			matches, _ := filepath.Glob(filepath.Join(dir, "*.cnf"))
			for _, m := range matches {
				if err := readOptionFile(m, values, depth+1); err != nil {
					return err
				}
			}
			continue
		case strings.HasPrefix(line, "!include"):
			if err := readOptionFile(strings.TrimSpace(strings.TrimPrefix(line, "!include")), values, depth+1); err != nil {
				return err
			}
			continue
		case line[0] == '[':
			group = strings.ToLower(strings.Trim(line, "[] \t"))
			continue
		}
		if group != "client" && group != "mysql" && group != "enginemig" {
			continue
		}
		key, val, hasVal := strings.Cut(line, "=")
		key = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(key)), "_", "-")
		if !hasVal {
			continue
		}
		values[key] = unquoteOption(strings.TrimSpace(val))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("option file %s: %w", path, err)
	}
	return nil
}

// unquoteOption strips matching quotes, or a trailing comment from an unquoted value.
func unquoteOption(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
			return v[1 : end+1]
		}
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v
}

// Address is host:port, or the socket path when connecting over a unix socket.
func (c Config) Address() string {
	if c.useSocket() {
		return c.Socket
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// useSocket follows the mysql client: "localhost" means the unix socket when one is known.
func (c Config) useSocket() bool {
	return c.Socket != "" && (c.Host == "" || c.Host == "localhost")
}

// TLS builds the tls.Config for the chosen mode; nil means no TLS.
func (c Config) TLS() (*tls.Config, error) {
	if c.SSLMode == SSLDisabled || c.SSLMode == "" {
		return nil, nil
	}
	tc := &tls.Config{ServerName: c.Host, MinVersion: tls.VersionTLS12}
	if c.SSLCA != "" {
		pem, err := os.ReadFile(c.SSLCA)
		if err != nil {
			return nil, fmt.Errorf("--ssl-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ssl-ca %s: no PEM certificate found", c.SSLCA)
		}
		tc.RootCAs = pool
	}
	if c.SSLCert != "" || c.SSLKey != "" {
		cert, err := tls.LoadX509KeyPair(c.SSLCert, c.SSLKey)
		if err != nil {
			return nil, fmt.Errorf("--ssl-cert/--ssl-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	switch c.SSLMode {
	case SSLPreferred, SSLRequired:
		// Encrypt, but like the mysql client do not verify the server certificate.
		tc.InsecureSkipVerify = true
	case SSLVerifyCA:
		// Verify the chain but not the host name.
		tc.InsecureSkipVerify = true
		tc.VerifyPeerCertificate = verifyChainOnly(tc.RootCAs)
	}
	return tc, nil
}

func verifyChainOnly(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("server sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}
