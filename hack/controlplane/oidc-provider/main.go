// oidc-provider is the OpenID provider of the local control plane, for the
// console's sign-in tests: zitadel/oidc's example provider (its op package,
// and example/server's storage and login page) with a few static users in
// groups, on the loopback, over plain HTTP.
//
//	oidc-provider --addr=127.0.0.1:0 --issuer-file=FILE
//
// Clients: `console`, public, PKCE required, any loopback port with the
// path /auth/callback; `console-web`, confidential (secret
// `console-secret`), the redirect URIs --redirect-uri names.
//
// Users (password: the name, then "-password"): alice in console-admins,
// bob in console-viewers, and mallory in system:masters, whom a console
// must never act as. Their `sub` is their name.
package main

import (
	"context"
	"flag"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// user is the example's User with groups, which it has not.
type user struct {
	storage.User
	Groups []string
}

func person(name, first string, groups ...string) *user {
	return &user{User: storage.User{ID: name, Username: name, Password: name + "-password",
		FirstName: first, LastName: "Test", Email: name + "@example.test", EmailVerified: true,
		PreferredLanguage: language.English}, Groups: groups}
}

var users = map[string]*user{
	"alice":   person("alice", "Alice", "console-admins"),
	"bob":     person("bob", "Bob", "console-viewers"),
	"mallory": person("mallory", "Mallory", "system:masters"),
}

// userStore serves the users above to the example's storage.
type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User {
	if u, ok := users[id]; ok {
		return &u.User
	}
	return nil
}
func (s userStore) GetUserByUsername(name string) *storage.User { return s.GetUserByID(name) }
func (userStore) ExampleClientID() string                       { return storage.ServiceUserID }

// groupStorage adds `groups` and `preferred_username` to the ID token and
// the userinfo answer whenever `openid` is asked for; every other method
// (the login check, token exchange and the rest) is the example's.
type groupStorage struct{ *storage.Storage }

func addClaims(info *oidc.UserInfo, subject string, scopes []string) {
	u, ok := users[subject]
	if !ok {
		return
	}
	for _, s := range scopes {
		if s == oidc.ScopeOpenID {
			info.PreferredUsername = u.Username
			info.AppendClaims("groups", u.Groups)
		}
	}
}

func (g groupStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := g.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	addClaims(info, req.GetSubject(), scopes)
	return nil
}

func (g groupStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := g.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	addClaims(info, info.Subject, []string{oidc.ScopeOpenID})
	return nil
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:5556", "address to listen on (port 0: one the kernel picks)")
	issuer := flag.String("issuer", "", "issuer URL (default http://<the address it listens on>)")
	issuerFile := flag.String("issuer-file", "", "file to write the issuer to once it listens")
	var redirects list
	flag.Var(&redirects, "redirect-uri", "a redirect URI of the confidential client console-web (repeatable)")
	flag.Parse()
	// Listen first: with port 0 the kernel picks the port, and the issuer,
	// which every token names, must carry it.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *issuer == "" {
		*issuer = "http://" + ln.Addr().String()
	}
	storage.RegisterClients(
		storage.NativeClient("console", "http://127.0.0.1/auth/callback", "http://localhost/auth/callback"),
		storage.WebClient("console-web", "console-secret", redirects...),
	)
	store := groupStorage{storage.NewStorage(userStore{})}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(*issuer, store, logger, false)
	if *issuerFile != "" {
		if err := os.WriteFile(*issuerFile, []byte(*issuer+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	server := &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("oidc-provider: issuer %s, serving on http://%s", *issuer, ln.Addr())
	log.Fatal(server.Serve(ln))
}
