package cceemu

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baidubce/bce-sdk-go/auth"
	bcehttp "github.com/baidubce/bce-sdk-go/http"
)

// The golden signature below was computed outside Go, with openssl, from the bce-auth-v1 description:
//
//	key=$(printf '%s' 'bce-auth-v1/ak-golden/2026-01-02T03:04:05Z/1800' | openssl dgst -sha256 -hmac sk-golden -r | cut -d' ' -f1)
//	printf 'GET\n/api/cce/service/v2/cluster/cce-abc123\nkeyword=a%%20b%%2Fc&pageNo=1\ncontent-type:application%%2Fjson%%3Bcharset%%3Dutf-8\nhost:127.0.0.1%%3A8080\nx-bce-date:2026-01-02T03%%3A04%%3A05Z' |
//	  openssl dgst -sha256 -hmac "$key" -r
//
// so the verifier is checked against something other than itself, and against the SDK's signer.
const (
	goldenAK        = "ak-golden"
	goldenSK        = "sk-golden"
	goldenDate      = "2026-01-02T03:04:05Z"
	goldenSignature = "8ffd91444ca3b9a158ecf55c9792126445b43428ead02ddea26764a192b5bad4"
	goldenAuth      = "bce-auth-v1/" + goldenAK + "/" + goldenDate + "/1800/content-type;host;x-bce-date/" + goldenSignature
)

func goldenRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/api/cce/service/v2/cluster/cce-abc123?pageNo=1&keyword=a+b%2Fc", nil)
	r.Header.Set("Content-Type", "application/json;charset=utf-8")
	r.Header.Set("X-Bce-Date", goldenDate)
	r.Header.Set("Authorization", goldenAuth)
	return r
}

func goldenVerifier() *verifier {
	at, _ := time.Parse(bceDateLayout, goldenDate)
	return &verifier{credentials: map[string]string{goldenAK: goldenSK}, now: func() time.Time { return at.Add(time.Minute) }}
}

func TestSignature_GoldenAcceptedByVerifier(t *testing.T) {
	if e := goldenVerifier().verify(goldenRequest(), nil); e != nil {
		t.Fatalf("verifier rejected the golden request: %v", e)
	}
}

func TestSignature_GoldenMatchesSDKSigner(t *testing.T) {
	req := &bcehttp.Request{}
	req.SetMethod(http.MethodGet)
	req.SetUri("/api/cce/service/v2/cluster/cce-abc123")
	req.SetParam("pageNo", "1")
	req.SetParam("keyword", "a b/c")
	req.SetHeader("Host", "127.0.0.1:8080")
	req.SetHeader("Content-Type", "application/json;charset=utf-8")
	req.SetHeader("x-bce-date", goldenDate)
	req.SetHeader("x-bce-request-id", "not-signed")
	at, _ := time.Parse(bceDateLayout, goldenDate)
	cred, _ := auth.NewBceCredentials(goldenAK, goldenSK)
	(&auth.BceV1Signer{}).Sign(req, cred, &auth.SignOptions{HeadersToSign: auth.DEFAULT_HEADERS_TO_SIGN, Timestamp: at.Unix(), ExpireSeconds: 1800})
	if got := req.Header("Authorization"); got != goldenAuth {
		t.Fatalf("SDK signer disagrees with the golden value:\n got %s\nwant %s", got, goldenAuth)
	}
}

func TestSignature_AnyChangeIsRejected(t *testing.T) {
	cases := map[string]func(r *http.Request){
		"method":      func(r *http.Request) { r.Method = http.MethodDelete },
		"path":        func(r *http.Request) { r.URL.Path = "/api/cce/service/v2/cluster/cce-abc124" },
		"query value": func(r *http.Request) { r.URL.RawQuery = "pageNo=2&keyword=a+b%2Fc" },
		"extra query": func(r *http.Request) { r.URL.RawQuery += "&x=1" },
		"host":        func(r *http.Request) { r.Host = "127.0.0.1:8081" },
		"signed hdr":  func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") },
		"signature":   func(r *http.Request) { r.Header.Set("Authorization", goldenAuth[:len(goldenAuth)-1]+"5") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			r := goldenRequest()
			mutate(r)
			e := goldenVerifier().verify(r, nil)
			if e == nil || e.Code != CodeSignatureDoesNotMatch || e.Status != http.StatusBadRequest {
				t.Fatalf("got %v, want 400 %s", e, CodeSignatureDoesNotMatch)
			}
		})
	}
}

func TestSignature_Rejections(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *http.Request, v *verifier)
		status int
		code   string
	}{
		{"no authorization", func(r *http.Request, _ *verifier) { r.Header.Del("Authorization") }, 403, CodeAccessDenied},
		{"malformed", func(r *http.Request, _ *verifier) { r.Header.Set("Authorization", "bce-auth-v1/x") }, 400, CodeInvalidHTTPAuthHeader},
		{"other version", func(r *http.Request, _ *verifier) {
			r.Header.Set("Authorization", "bce-auth-v2"+goldenAuth[len("bce-auth-v1"):])
		}, 400, CodeInvalidHTTPAuthHeader},
		{"unknown key", func(_ *http.Request, v *verifier) { v.credentials = map[string]string{"other": "x"} }, 403, CodeInvalidAccessKeyID},
		{"stale", func(_ *http.Request, v *verifier) {
			v.now = func() time.Time { t, _ := time.Parse(bceDateLayout, goldenDate); return t.Add(31 * time.Minute) }
		}, 400, CodeRequestExpired},
		{"from the future", func(_ *http.Request, v *verifier) {
			v.now = func() time.Time { t, _ := time.Parse(bceDateLayout, goldenDate); return t.Add(-31 * time.Minute) }
		}, 400, CodeRequestExpired},
		{"skew bound", func(_ *http.Request, v *verifier) { v.maxSkew = 30 * time.Second }, 400, CodeRequestExpired},
		{"sts key without token", func(_ *http.Request, v *verifier) { v.stsTokens = map[string]string{goldenAK: "tok"} }, 403, CodeInvalidSessionToken},
		{"md5 of another body", func(r *http.Request, _ *verifier) { r.Header.Set("Content-Md5", "1B2M2Y8AsgTpgAmY7PhCfg==x") }, 400, CodeBadDigest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, v := goldenRequest(), goldenVerifier()
			tc.mutate(r, v)
			e := v.verify(r, nil)
			if e == nil || e.Code != tc.code || e.Status != tc.status {
				t.Fatalf("got %v, want %d %s", e, tc.status, tc.code)
			}
		})
	}
}

func TestUriEncode(t *testing.T) {
	for in, want := range map[string]string{"a b": "a%20b", "a/b": "a%2Fb", "~-_.": "~-_.", "é": "%C3%A9", "a+b": "a%2Bb"} {
		if got := uriEncode(in, true); got != want {
			t.Errorf("uriEncode(%q) = %q, want %q", in, got, want)
		}
	}
	if got := uriEncode("/a b/c", false); got != "/a%20b/c" {
		t.Errorf("path encoding kept %q", got)
	}
}

func FuzzParseAuthString(f *testing.F) {
	f.Add(goldenAuth)
	f.Add("bce-auth-v1/ak/2026-01-02T03:04:05Z/1800//sig")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseAuthString(h)
		if err != nil {
			return
		}
		if a.AccessKey == "" || a.Signature == "" || a.Expire <= 0 {
			t.Fatalf("accepted %q as %+v", h, a)
		}
	})
}
