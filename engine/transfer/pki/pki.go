// Package pki makes the development certificates of a Cloison cluster: one
// CA and a certificate per node, ECDSA P-256, usable as TLS server and
// client (node-to-node traffic is mutual TLS). Production deployments bring
// their own CA; cloisonctl uses this package for development clusters and
// tests use it for real mTLS over loopback.
//
// Roles: a node certificate names the node's role in a URI SAN
// spiffe://cloison/role/prefill or spiffe://cloison/role/decode (IssueRole).
// RequirePeerRole makes a TLS config refuse a peer whose certificate names
// another role, or none: a prefill node's certificate cannot serve or call as
// a decode node, and the other way round. The role is signed by the CA like
// the rest of the certificate; whoever holds the CA key can mint any role.
//
// Labels (where a tenant's data may be processed: residency): a node certificate may name the node's residency
// labels as URI SANs spiffe://cloison/label/region/VALUE and
// spiffe://cloison/label/tier/VALUE (IssueNode, LabelsOf). A node attests
// the labels its certificate names — no more, no other — so a prefill node
// cannot claim a region its CA did not sign for it without failing the
// decode node's check (attest.Prefill), and cloisond refuses to start with
// --node-region/--node-tier that differ from its certificate's.
//
// Stdlib only.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"
)

// Node roles a certificate can carry.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// rolePrefix is the URI SAN prefix of a role; the role follows it.
const rolePrefix = "spiffe://cloison/role/"

// labelPrefix is the URI SAN prefix of a label: KEY/VALUE follows it.
const labelPrefix = "spiffe://cloison/label/"

// Labels are the residency labels a node certificate names (attest.Labels).
type Labels struct {
	Region, Tier string
}

// ErrLabel: a certificate names an unknown label, one twice, or a value
// that is not a DNS label.
var ErrLabel = errors.New("pki: certificate label")

func validLabel(v string) bool {
	if len(v) < 1 || len(v) > 63 || v[0] == '-' || v[len(v)-1] == '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// LabelsOf returns the labels a certificate names (empty: none).
//
// Errors: ErrLabel.
func LabelsOf(c *x509.Certificate) (Labels, error) {
	var l Labels
	seen := map[string]bool{}
	for _, u := range c.URIs {
		s := u.String()
		if !strings.HasPrefix(s, labelPrefix) {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(s, labelPrefix), "/")
		if !ok || seen[key] || !validLabel(value) {
			return Labels{}, fmt.Errorf("%w: certificate %q names %q", ErrLabel, c.Subject.CommonName, s)
		}
		seen[key] = true
		switch key {
		case "region":
			l.Region = value
		case "tier":
			l.Tier = value
		default:
			return Labels{}, fmt.Errorf("%w: certificate %q names unknown label %q", ErrLabel, c.Subject.CommonName, key)
		}
	}
	return l, nil
}

// ErrRole: a certificate names no role, several, or not the one required.
var ErrRole = errors.New("pki: certificate role")

// RoleOf returns the role a certificate names.
//
// Errors: ErrRole (no role URI, more than one, or an unknown role).
func RoleOf(c *x509.Certificate) (string, error) {
	var roles []string
	for _, u := range c.URIs {
		if s := u.String(); strings.HasPrefix(s, rolePrefix) {
			roles = append(roles, strings.TrimPrefix(s, rolePrefix))
		}
	}
	if len(roles) != 1 || (roles[0] != RolePrefill && roles[0] != RoleDecode) {
		return "", fmt.Errorf("%w: certificate %q names roles %q, want exactly one of %s, %s", ErrRole, c.Subject.CommonName, roles, RolePrefill, RoleDecode)
	}
	return roles[0], nil
}

// RequirePeerRole returns a copy of cfg (a ServerConfig or ClientConfig)
// that, after the usual chain verification, refuses a peer whose leaf
// certificate does not name role.
func RequirePeerRole(cfg *tls.Config, role string) *tls.Config {
	out := cfg.Clone()
	out.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: the peer presented no certificate", ErrRole)
		}
		got, err := RoleOf(cs.PeerCertificates[0])
		if err != nil {
			return err
		}
		if got != role {
			return fmt.Errorf("%w: the peer is a %s node, want %s", ErrRole, got, role)
		}
		return nil
	}
	return out
}

// CA is a certificate authority whose key is in memory.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	der  []byte
}

// Validity of everything this package issues.
const Validity = 365 * 24 * time.Hour

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA returns a fresh CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Cloison"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(Validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, der: der}, nil
}

// Pool returns a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertPEM returns the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Issue returns a node certificate for name, valid for TLS server and client
// authentication, with hosts (IP addresses or DNS names) as subject
// alternative names, and no role (nodes that RequirePeerRole refuse it).
func (ca *CA) Issue(name string, hosts ...string) (tls.Certificate, error) {
	return ca.IssueRole(name, "", hosts...)
}

// IssueRole is Issue with the node's role (RolePrefill or RoleDecode) bound
// into the certificate as a URI SAN; "" issues none.
func (ca *CA) IssueRole(name, role string, hosts ...string) (tls.Certificate, error) {
	return ca.IssueNode(name, role, Labels{}, hosts...)
}

// IssueNode is IssueRole with the node's residency labels bound into the
// certificate as URI SANs (an empty one is not named).
//
// Errors: ErrRole, ErrLabel (a value that is not a DNS label).
func (ca *CA) IssueNode(name, role string, labels Labels, hosts ...string) (tls.Certificate, error) {
	if name == "" {
		return tls.Certificate{}, errors.New("pki: empty node name")
	}
	if role != "" && role != RolePrefill && role != RoleDecode {
		return tls.Certificate{}, fmt.Errorf("%w: unknown role %q", ErrRole, role)
	}
	var uris []string
	if role != "" {
		uris = append(uris, rolePrefix+role)
	}
	for _, kv := range [][2]string{{"region", labels.Region}, {"tier", labels.Tier}} {
		if kv[1] == "" {
			continue
		}
		if !validLabel(kv[1]) {
			return tls.Certificate{}, fmt.Errorf("%w: %s %q is not a DNS label", ErrLabel, kv[0], kv[1])
		}
		uris = append(uris, labelPrefix+kv[0]+"/"+kv[1])
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	sn, err := serial()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Cloison"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// EncodePEM returns a node certificate and its private key in PEM, for files.
func EncodePEM(c tls.Certificate) (certPEM, keyPEM []byte, err error) {
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || len(c.Certificate) == 0 {
		return nil, nil, errors.New("pki: not a certificate of this package")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ServerConfig returns the TLS config of a node accepting node-to-node
// connections: TLS 1.3 only, and a client certificate signed by ca is
// required.
func ServerConfig(cert tls.Certificate, ca *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca,
	}
}

// ClientConfig returns the TLS config of a node dialing serverName (a host
// its certificate names), presenting cert and trusting only ca.
func ClientConfig(cert tls.Certificate, ca *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca,
		ServerName:   serverName,
	}
}

// LoadPEM parses a certificate and key written by EncodePEM (or any PEM pair).
func LoadPEM(certPEM, keyPEM []byte) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	return c, nil
}
