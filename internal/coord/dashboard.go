package coord

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed web
var webFS embed.FS

var staticFS, _ = fs.Sub(webFS, "web")

// csp keeps the dashboard to its own embedded files: no CDN, no inline
// script, and data from agents can never become markup or a request.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// handleDashboard serves the page. The viewer token comes once as
// ?token= (the URL the CLI prints); it is swapped for an HttpOnly cookie
// and the browser sent back to a URL without it, so it does not linger in
// history or in a Referer.
func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if tok := r.URL.Query().Get("token"); tok != "" {
		e, ok := s.auth.lookup(r.Context(), tok)
		if !ok || e.role != roleViewer {
			s.dashboardDenied(w, "This link's token is not a viewer token of any fleet here.")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: viewerCookie, Value: tok, Path: "/",
			HttpOnly: true, Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode,
			MaxAge: 30 * 24 * 3600,
		})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	tok := bearer(r, roleViewer)
	if e, ok := s.auth.lookup(r.Context(), tok); tok == "" || !ok || e.role != roleViewer {
		s.dashboardDenied(w, "Open the dashboard with the link vastfleet printed (it carries the fleet's viewer token).")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.ServeFileFS(w, r, staticFS, "index.html")
}

func (s *Server) dashboardDenied(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	// msg is one of the constants above, never request data.
	_, _ = w.Write([]byte("<!doctype html><meta charset=utf-8><title>vastfleet</title><p>" + msg + "</p>\n"))
}

// handleStatic serves the embedded script and style; they hold no data,
// so no token is needed.
func (s *Server) handleStatic(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	if name == "" || name == "index.html" || strings.Contains(name, "/") {
		writeError(w, http.StatusNotFound, "no such file")
		return
	}
	http.ServeFileFS(w, r, staticFS, name)
}
