package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"
)

// S3Options configures the S3 backend. Credentials and region come from
// the standard AWS chain (environment, shared config and credentials
// files, web identity, instance roles).
type S3Options struct {
	Bucket   string
	Prefix   string
	Endpoint string // S3-compatible endpoint URL; empty for AWS
	// HTTPClient, when set, carries every request (tests inject faults
	// through its transport).
	HTTPClient *http.Client
	// MaxAttempts bounds the SDK's retries of one call (503 SlowDown,
	// timeouts) with jittered backoff; 0 means 4.
	MaxAttempts int
}

// S3 is the s3:// backend on aws-sdk-go-v2, path-style so that
// S3-compatible servers (versitygw, MinIO) work on any endpoint.
type S3 struct {
	c      *s3.Client
	bucket string
	prefix string
	desc   string
}

// OpenS3 builds the client. It does not contact the server.
func OpenS3(ctx context.Context, o S3Options) (*S3, error) {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 4
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = 2 * time.Second
			})
		}),
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("tier s3: aws config: %w", err)
	}
	if cfg.Region == "" {
		// S3-compatible servers ignore the region but signing needs one.
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = true
		if o.HTTPClient != nil {
			// Set here, not in the loaded config: the config would wrap
			// it for AWS_CA_BUNDLE, which a plain *http.Client refuses.
			so.HTTPClient = o.HTTPClient
		}
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		// The SDK's default request checksums (CRC32 trailers since s3
		// v1.73) break S3-compatible servers; segments carry their own
		// checksums, verified on every read.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	desc := "s3://" + o.Bucket
	if o.Prefix != "" {
		desc += "/" + o.Prefix
	}
	if o.Endpoint != "" {
		desc += " at " + o.Endpoint
	}
	return &S3{c: c, bucket: o.Bucket, prefix: o.Prefix, desc: desc}, nil
}

func (s *S3) key(k string) string {
	if s.prefix == "" {
		return k
	}
	return path.Join(s.prefix, k)
}

// Put implements ObjectStore: one PutObject (segments stay far below the
// 5 GiB single-PUT limit), then a HEAD that checks the stored size, since
// a PUT through a misbehaving proxy can be cut short and still succeed.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	body := &putBody{r: bytes.NewReader(data)}
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.key(key)),
		Body:          body,
		ContentLength: aws.Int64(int64(len(data))),
	})
	body.close()
	if err != nil {
		return fmt.Errorf("tier s3: put %s: %w", key, err)
	}
	n, err := s.Size(ctx, key)
	if err != nil {
		return fmt.Errorf("tier s3: put %s: check: %w", key, err)
	}
	if n != int64(len(data)) {
		return fmt.Errorf("tier s3: put %s: stored %d bytes of %d: %w", key, n, len(data), ErrTruncated)
	}
	return nil
}

// putBody is a PUT's body that stops reading the caller's bytes once
// closed. The HTTP transport may still be writing a request body when
// the response has come (a server answering early with an error), and
// Put promises not to read data after it returns.
type putBody struct {
	mu     sync.Mutex
	r      *bytes.Reader // guarded by mu
	closed bool          // guarded by mu
}

func (b *putBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errPutDone
	}
	return b.r.Read(p)
}

func (b *putBody) Seek(off int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errPutDone
	}
	return b.r.Seek(off, whence)
}

func (b *putBody) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

var errPutDone = errors.New("tier s3: put already returned")

// GetRange implements ObjectStore with a ranged GET; a body shorter than
// asked for is ErrTruncated, never a short answer.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if n >= 0 {
		if n == 0 {
			return []byte{}, nil
		}
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.key(key)),
		Range:  aws.String(rng),
	})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("tier s3: %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("tier s3: get %s %s: %w", key, rng, err)
	}
	defer out.Body.Close()
	want := n
	if want < 0 && out.ContentLength != nil {
		want = *out.ContentLength
	}
	var buf []byte
	if want >= 0 {
		buf = make([]byte, want)
		if _, err := io.ReadFull(out.Body, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("tier s3: get %s %s: %w", key, rng, ErrTruncated)
			}
			return nil, fmt.Errorf("tier s3: get %s %s: %w", key, rng, err)
		}
		return buf, nil
	}
	buf, err = io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("tier s3: get %s %s: %w", key, rng, err)
	}
	return buf, nil
}

// Size implements ObjectStore.
func (s *S3) Size(ctx context.Context, key string) (int64, error) {
	out, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))})
	if err != nil {
		if isNotFound(err) {
			return 0, fmt.Errorf("tier s3: %s: %w", key, ErrNotFound)
		}
		return 0, fmt.Errorf("tier s3: head %s: %w", key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Delete implements ObjectStore; S3 deletes are idempotent.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("tier s3: delete %s: %w", key, err)
	}
	return nil
}

// List implements ObjectStore.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	full := s.key(prefix)
	if prefix == "" && s.prefix != "" {
		full = s.prefix + "/"
	}
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(full)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tier s3: list %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if s.prefix != "" {
				k = strings.TrimPrefix(k, s.prefix+"/")
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// ListPage implements ObjectStore with one ListObjectsV2 call.
func (s *S3) ListPage(ctx context.Context, after string, max int) ([]ObjectInfo, string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), MaxKeys: aws.Int32(int32(min(max, 1000)))}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix + "/")
	}
	if after != "" {
		in.StartAfter = aws.String(s.key(after))
	}
	page, err := s.c.ListObjectsV2(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("tier s3: list after %q: %w", after, err)
	}
	out := make([]ObjectInfo, 0, len(page.Contents))
	for _, o := range page.Contents {
		k := aws.ToString(o.Key)
		if s.prefix != "" {
			k = strings.TrimPrefix(k, s.prefix+"/")
		}
		out = append(out, ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
	}
	next := ""
	if aws.ToBool(page.IsTruncated) && len(out) > 0 {
		next = out[len(out)-1].Key
	}
	return out, next, nil
}

func (s *S3) String() string { return s.desc }

func isNotFound(err error) bool {
	var nk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}
