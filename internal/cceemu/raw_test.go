package cceemu_test

// Requests the SDK would never send (old dates, bodies changed after signing), built by hand and signed with
// the SDK's own signer so that only the property under test is wrong.

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baidubce/bce-sdk-go/auth"
	bcehttp "github.com/baidubce/bce-sdk-go/http"

	"github.com/elasticctr/terraform-provider-ctr/internal/cceemu"
)

// signedRequest builds method ep+path?query with body, signed by the SDK's signer as of signedAt, with
// x-bce-date set to signedAt too (as the SDK does).
func signedRequest(t *testing.T, ep, method, path string, query url.Values, body []byte, signedAt time.Time) *http.Request {
	t.Helper()
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	date := signedAt.UTC().Format("2006-01-02T15:04:05Z")
	headers := map[string]string{
		"Host":         u.Host,
		"Content-Type": "application/json;charset=utf-8",
		"x-bce-date":   date,
	}
	if body != nil {
		sum := md5.Sum(body)
		headers["Content-Length"] = strconv.Itoa(len(body))
		headers["Content-Md5"] = base64.StdEncoding.EncodeToString(sum[:])
	}
	sreq := &bcehttp.Request{}
	sreq.SetMethod(method)
	sreq.SetUri(path)
	for k, vs := range query {
		sreq.SetParam(k, vs[0])
	}
	for k, v := range headers {
		sreq.SetHeader(k, v)
	}
	cred, _ := auth.NewBceCredentials(testAK, testSK)
	(&auth.BceV1Signer{}).Sign(sreq, cred, &auth.SignOptions{HeadersToSign: auth.DEFAULT_HEADERS_TO_SIGN, Timestamp: signedAt.Unix(), ExpireSeconds: 1800})

	r, err := http.NewRequest(method, ep+path+"?"+query.Encode(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k != "Host" && k != "Content-Length" {
			r.Header.Set(k, v)
		}
	}
	r.Header.Set("Authorization", sreq.Header("Authorization"))
	return r
}

type errorBody struct{ Code, Message, RequestID string }

func send(t *testing.T, r *http.Request) (int, errorBody) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"requestId"`
	}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("error body %q is not JSON: %v", raw, err)
		}
		if e.RequestID == "" || e.RequestID != resp.Header.Get("x-bce-request-id") {
			t.Fatalf("requestId %q vs header %q", e.RequestID, resp.Header.Get("x-bce-request-id"))
		}
	}
	return resp.StatusCode, errorBody{e.Code, e.Message, e.RequestID}
}

func createBody(t *testing.T, name string) []byte {
	t.Helper()
	b, err := json.Marshal(clusterArgs(name, "1.34.2").CreateClusterRequest)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRaw_HandSignedRequestIsAccepted(t *testing.T) {
	s, ep := startEmu(t)
	status, e := send(t, signedRequest(t, ep, http.MethodPost, cceemu.APIPrefix+"/cluster", nil, createBody(t, "hand"), time.Now()))
	if status != http.StatusOK || len(s.Clusters()) != 1 {
		t.Fatalf("status %d %+v; the hand-made request must pass for the other raw tests to mean anything", status, e)
	}
}

func TestRaw_StaleDateIsRejected(t *testing.T) {
	_, ep := startEmu(t)
	for name, at := range map[string]time.Time{
		"an hour old":         time.Now().Add(-time.Hour),
		"an hour from now":    time.Now().Add(time.Hour),
		"just past 1800s ago": time.Now().Add(-1801 * time.Second),
	} {
		status, e := send(t, signedRequest(t, ep, http.MethodGet, cceemu.APIPrefix+"/clusters", url.Values{"pageNo": {"1"}, "pageSize": {"10"}}, nil, at))
		if status != http.StatusBadRequest || e.Code != cceemu.CodeRequestExpired {
			t.Errorf("%s: got %d %+v, want 400 %s", name, status, e, cceemu.CodeRequestExpired)
		}
	}
}

func TestRaw_MaxClockSkewTightensTheWindow(t *testing.T) {
	_, ep := startEmu(t, func(o *cceemu.Options) { o.MaxClockSkew = time.Minute })
	status, e := send(t, signedRequest(t, ep, http.MethodGet, cceemu.APIPrefix+"/clusters", url.Values{"pageNo": {"1"}, "pageSize": {"1"}}, nil, time.Now().Add(-2*time.Minute)))
	if status != http.StatusBadRequest || e.Code != cceemu.CodeRequestExpired {
		t.Fatalf("got %d %+v", status, e)
	}
}

func TestRaw_TamperedBodyIsRejected(t *testing.T) {
	s, ep := startEmu(t)
	orig := createBody(t, "honest")

	// Same length: the signature (over Content-Length and Content-MD5) still matches; the MD5 does not.
	r := signedRequest(t, ep, http.MethodPost, cceemu.APIPrefix+"/cluster", nil, orig, time.Now())
	same := bytes.Replace(orig, []byte("honest"), []byte("evilxx"), 1)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(same)), int64(len(same))
	if status, e := send(t, r); status != http.StatusBadRequest || e.Code != cceemu.CodeBadDigest {
		t.Errorf("same-length tamper: got %d %+v, want 400 %s", status, e, cceemu.CodeBadDigest)
	}

	// Other length: net/http sends the real Content-Length, which no longer matches the signed one.
	r = signedRequest(t, ep, http.MethodPost, cceemu.APIPrefix+"/cluster", nil, orig, time.Now())
	longer := bytes.Replace(orig, []byte("honest"), []byte("dishonest"), 1)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(longer)), int64(len(longer))
	if status, e := send(t, r); status != http.StatusBadRequest || e.Code != cceemu.CodeSignatureDoesNotMatch {
		t.Errorf("longer tamper: got %d %+v, want 400 %s", status, e, cceemu.CodeSignatureDoesNotMatch)
	}
	if n := len(s.Clusters()); n != 0 {
		t.Fatalf("a tampered create made %d clusters", n)
	}
}

func TestRaw_ListClustersNeedsPositivePage(t *testing.T) {
	_, ep := startEmu(t)
	for _, q := range []url.Values{{"pageNo": {"0"}, "pageSize": {"10"}}, {"pageNo": {"1"}}, {"pageNo": {"1"}, "pageSize": {"-1"}}} {
		status, e := send(t, signedRequest(t, ep, http.MethodGet, cceemu.APIPrefix+"/clusters", q, nil, time.Now()))
		if status != http.StatusBadRequest || e.Code != cceemu.CodeInvalidParam {
			t.Errorf("%v: got %d %+v", q, status, e)
		}
	}
}

func TestRaw_MalformedAndUnknown(t *testing.T) {
	_, ep := startEmu(t)
	status, e := send(t, signedRequest(t, ep, http.MethodPost, cceemu.APIPrefix+"/cluster", nil, []byte("{not json"), time.Now()))
	if status != http.StatusBadRequest || e.Code != cceemu.CodeMalformedJSON {
		t.Errorf("malformed: got %d %+v", status, e)
	}
	status, e = send(t, signedRequest(t, ep, http.MethodPatch, cceemu.APIPrefix+"/cluster", nil, nil, time.Now()))
	if status != http.StatusNotFound || e.Code != cceemu.CodeInvalidURI {
		t.Errorf("unknown route: got %d %+v", status, e)
	}
	status, e = send(t, signedRequest(t, ep, http.MethodGet, cceemu.APIPrefix+"/kubeconfig/cce-x/admin", nil, nil, time.Now()))
	if status != http.StatusBadRequest || !strings.Contains(e.Message, "admin") {
		t.Errorf("bad kubeconfig type: got %d %+v", status, e)
	}
}
