package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// newLoadCmd is a load generator for a running cloisond: N concurrent
// clients stream completions for a fixed time, each a loop of requests. It
// reports requests/s, tokens/s, time to first token (p50/p99), errors, and
// the server's peak RSS when given its pid. Traffic goes only to --url.
func newLoadCmd() *cobra.Command {
	var url, token, model string
	var clients, maxTokens, promptLen int
	var duration time.Duration
	var pid int
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Drive a running cloisond with concurrent streaming clients and report throughput and latency",
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(c.Context(), duration)
			defer cancel()
			var mu sync.Mutex
			var ttfts []time.Duration
			var reqs, toks, errs int
			errKinds := map[string]int{}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			var wg sync.WaitGroup
			start := time.Now()
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						prompt := strings.Repeat(string(rune('a'+(i+n)%26)), promptLen)
						ttft, nt, err := streamOnce(ctx, client, url, token, model, prompt, maxTokens)
						mu.Lock()
						switch {
						case err == nil:
							reqs++
							toks += nt
							ttfts = append(ttfts, ttft)
						case ctx.Err() == nil:
							errs++
							errKinds[err.Error()]++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			slices.Sort(ttfts)
			pct := func(p float64) time.Duration {
				if len(ttfts) == 0 {
					return 0
				}
				return ttfts[min(len(ttfts)-1, int(p*float64(len(ttfts))))]
			}
			out := c.OutOrStdout()
			fmt.Fprintf(out, "clients %d, %.0f s: %d requests (%.1f/s), %d tokens (%.0f/s), errors %d\n", clients, el, reqs, float64(reqs)/el, toks, float64(toks)/el, errs)
			fmt.Fprintf(out, "time to first token: p50 %v, p99 %v\n", pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
			for k, v := range errKinds {
				fmt.Fprintf(out, "  error ×%d: %s\n", v, k)
			}
			if pid > 0 {
				if rss, err := peakRSS(pid); err == nil {
					fmt.Fprintf(out, "server peak RSS: %d MiB\n", rss>>20)
				}
			}
			if errs > 0 {
				return fmt.Errorf("%d errors", errs)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "http://127.0.0.1:8080", "cloisond base URL (loopback only)")
	f.StringVar(&token, "token", os.Getenv("CLOISON_TOKEN"), "bearer token (env CLOISON_TOKEN)")
	f.StringVar(&model, "model", "cloison-context-bag", "model id")
	f.IntVar(&clients, "clients", 64, "concurrent streaming clients")
	f.DurationVar(&duration, "duration", time.Minute, "how long to run")
	f.IntVar(&maxTokens, "max-tokens", 32, "tokens per completion")
	f.IntVar(&promptLen, "prompt", 64, "prompt length in characters")
	f.IntVar(&pid, "pid", 0, "server pid, to report its peak RSS (Linux)")
	return cmd
}

func streamOnce(ctx context.Context, client *http.Client, url, token, model, prompt string, maxTokens int) (time.Duration, int, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens, "stream": true})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var ttft time.Duration
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return ttft, n, nil
		}
		if strings.Contains(line, `"error"`) {
			return 0, 0, fmt.Errorf("stream error: %s", line)
		}
		if ttft == 0 {
			ttft = time.Since(start)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("stream ended without [DONE]")
}

// peakRSS reads VmHWM from /proc/PID/status, in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM")
}
