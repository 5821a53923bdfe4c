package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
)

// newCertCmd makes development certificates for node-to-node mutual TLS
// (cloisond --role prefill|decode).
func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Development certificates for node-to-node mutual TLS"}
	var dir, nodes, hosts, labels string
	var force bool
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Write a development CA and one certificate per node (PEM), and a cluster key",
		Long: `Writes into --dir: ca.pem (the CA certificate every node trusts: --tls-ca),
NODE.pem and NODE-key.pem for each of --nodes (--tls-cert, --tls-key; valid for
TLS server and client, naming NODE, localhost, 127.0.0.1, ::1 and --hosts, and
the node's role as the URI SAN spiffe://cloison/role/ROLE), and
cluster.key (the manifest HMAC key: --cluster-key) unless it exists. The CA key
is not kept: rerun with --force to reissue everything. Production deployments
bring their own CA.

Each of --nodes is NAME:ROLE with ROLE prefill or decode, or a NAME that starts
with prefill or decode (the role it names). A node presents its certificate
only in its role: a prefill node refuses to call or serve a decode-role peer
as a prefill node, and the other way round.

--labels NAME=REGION/TIER,... binds a node's residency labels into its
certificate (URI SANs spiffe://cloison/label/region/REGION and
spiffe://cloison/label/tier/TIER; either part may be empty): the node must
attest exactly these (cloisond --node-region, --node-tier), and a decode
node refuses a prefill node that attests others.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nl, err := nodeLabels(splitList(labels))
			if err != nil {
				return err
			}
			return certInit(cmd, dir, splitList(nodes), splitList(hosts), nl, force)
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "output directory (required)")
	initCmd.Flags().StringVar(&nodes, "nodes", "decode,prefill-1", "nodes, comma-separated: NAME:ROLE (prefill or decode), or a NAME starting with its role")
	initCmd.Flags().StringVar(&hosts, "hosts", "", "extra host names or IP addresses every node certificate names, comma-separated")
	initCmd.Flags().StringVar(&labels, "labels", "", "residency labels per node, comma-separated NAME=REGION/TIER (e.g. prefill-1=ca-qc/dedicated; either part may be empty)")
	initCmd.Flags().BoolVar(&force, "force", false, "overwrite an existing CA and certificates")
	_ = initCmd.MarkFlagRequired("dir")
	cmd.AddCommand(initCmd)
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// nodeLabels parses NAME=REGION/TIER entries.
func nodeLabels(specs []string) (map[string]pki.Labels, error) {
	out := map[string]pki.Labels{}
	for _, s := range specs {
		name, rt, ok := strings.Cut(s, "=")
		region, tier, _ := strings.Cut(rt, "/")
		if !ok || name == "" {
			return nil, fmt.Errorf("cert init: --labels %q: want NAME=REGION/TIER", s)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("cert init: --labels names %s twice", name)
		}
		out[name] = pki.Labels{Region: region, Tier: tier}
	}
	return out, nil
}

func certInit(cmd *cobra.Command, dir string, nodes, hosts []string, labels map[string]pki.Labels, force bool) error {
	if len(nodes) == 0 {
		return errors.New("cert init: --nodes names no node")
	}
	roles := map[string]string{}
	for i, spec := range nodes {
		n, role, err := nodeRole(spec)
		if err != nil {
			return err
		}
		if strings.ContainsAny(n, `/\`) || n == "." || n == ".." || n == "ca" || n == "cluster" {
			return fmt.Errorf("cert init: invalid node name %q", n)
		}
		nodes[i], roles[n] = n, role
	}
	for n := range labels {
		if _, ok := roles[n]; !ok {
			return fmt.Errorf("cert init: --labels names %s, which is not in --nodes", n)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caPath := filepath.Join(dir, "ca.pem")
	if _, err := os.Stat(caPath); err == nil && !force {
		return fmt.Errorf("cert init: %s exists (use --force to reissue the CA and every certificate)", caPath)
	}
	ca, err := pki.NewCA("cloison-dev-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(caPath, ca.CertPEM(), 0o644); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "CA          %s\n", caPath)
	for _, n := range nodes {
		names := append([]string{n, "localhost", "127.0.0.1", "::1"}, hosts...)
		cert, err := ca.IssueNode(n, roles[n], labels[n], names...)
		if err != nil {
			return fmt.Errorf("cert init: %s: %w", n, err)
		}
		certPEM, keyPEM, err := pki.EncodePEM(cert)
		if err != nil {
			return err
		}
		cp, kp := filepath.Join(dir, n+".pem"), filepath.Join(dir, n+"-key.pem")
		if err := os.WriteFile(cp, certPEM, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(kp, keyPEM, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(out, "node %-6s %s %s (%s; role %s)\n", n, cp, kp, strings.Join(names, ", "), roles[n])
		if l, ok := labels[n]; ok {
			fmt.Fprintf(out, "            labels: region %q, tier %q\n", l.Region, l.Tier)
		}
	}
	keyPath := filepath.Join(dir, "cluster.key")
	if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
		k, err := transfer.NewKey("cluster")
		if err != nil {
			return err
		}
		if err := os.WriteFile(keyPath, []byte(hex.EncodeToString(k.Secret)+"\n"), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "cluster key %s\n", keyPath)
	return nil
}

// nodeRole splits NAME:ROLE, or infers the role from a NAME that starts
// with it.
func nodeRole(spec string) (name, role string, err error) {
	name, role, explicit := strings.Cut(spec, ":")
	if !explicit {
		switch {
		case strings.HasPrefix(name, pki.RolePrefill):
			role = pki.RolePrefill
		case strings.HasPrefix(name, pki.RoleDecode):
			role = pki.RoleDecode
		}
	}
	if role != pki.RolePrefill && role != pki.RoleDecode {
		return "", "", fmt.Errorf("cert init: node %q: name its role (NAME:prefill or NAME:decode)", spec)
	}
	return name, role, nil
}
