// The console's one script. The server renders every view as an HTML fragment at
// /v1/console/<view>; this script asks for the fragment of the address shown, with the bearer
// token it holds in memory only (never in storage, never in an address), and follows the
// links, forms and buttons inside it. Signing in is the authorisation code flow with PKCE at
// the configured issuer.

const config = document.querySelector('meta[name="fetcher-console"]').dataset;
const view = document.getElementById("view");
const notice = document.getElementById("notice");
const signInButton = document.getElementById("sign-in");
const signOutButton = document.getElementById("sign-out");
const CALLBACK = "/console/signed-in";
const PKCE_KEY = "fetcher-console-sign-in";

let token = null;
let refreshTimer = null;
let generation = 0;

function fragmentUrl(location) {
  const view = location.pathname.replace(/^\/console\/?/, "") || "jobs";
  return `/v1/console/${view}${location.search}`;
}

function say(text) {
  notice.textContent = text;
  notice.hidden = !text;
}

function showSession() {
  const oidc = config.auth === "oidc";
  signInButton.hidden = !oidc || token !== null;
  signOutButton.hidden = !oidc || token === null;
}

async function call(url, options = {}) {
  const headers = { Accept: "text/html", ...(options.headers || {}) };
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(url, { ...options, headers, credentials: "omit" });
  if (response.status === 401 && token !== null) {
    token = null; // expired or revoked: sign in again
    showSession();
  }
  return response;
}

// An error answer of the API (JSON with the FET code) as a message; its text is set as text.
async function failure(response) {
  const box = document.createElement("div");
  box.className = "error";
  box.setAttribute("role", "alert");
  const head = document.createElement("strong");
  const detail = document.createElement("p");
  box.append(head, detail);
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  head.textContent = body && body.code ? `${body.code} ${body.title || ""}` : `HTTP ${response.status}`;
  detail.textContent = body && body.message ? body.message : response.statusText;
  if (response.status === 401) {
    const hint = document.createElement("p");
    hint.textContent =
      config.auth === "oidc"
        ? "Sign in to see this."
        : "This service needs a bearer token and the console has no sign-in configured (FETCHER_CONSOLE_CLIENT_ID).";
    box.append(hint);
  } else if (response.status === 403) {
    const hint = document.createElement("p");
    hint.textContent = "Your sign-in does not grant the permission this view needs.";
    box.append(hint);
  }
  return box;
}

async function load(into, url) {
  let response;
  try {
    response = await call(url);
  } catch {
    into.replaceChildren(Object.assign(document.createElement("p"), {
      className: "error",
      textContent: "The service could not be reached.",
    }));
    return false;
  }
  if (!response.ok) {
    into.replaceChildren(await failure(response));
    return false;
  }
  into.innerHTML = await response.text();
  await enhance(into);
  return true;
}

async function enhance(root) {
  for (const section of root.querySelectorAll("[data-load]")) {
    await load(section, section.dataset.load);
  }
}

function editing() {
  const active = document.activeElement;
  return active && view.contains(active) && active.matches("input, select, textarea");
}

function scheduleRefresh(mine) {
  clearTimeout(refreshTimer);
  const live = view.querySelector("[data-refresh]");
  if (!live) return;
  refreshTimer = setTimeout(async () => {
    if (mine !== generation) return;
    if (document.visibilityState === "visible" && !editing()) {
      const fresh = document.createElement("div");
      if (await load(fresh, fragmentUrl(window.location)) && mine === generation) {
        view.replaceChildren(...fresh.childNodes);
      }
    }
    if (mine === generation) scheduleRefresh(mine);
  }, Number(live.dataset.refresh) || 2000);
}

async function navigate({ focus = true } = {}) {
  const mine = ++generation;
  clearTimeout(refreshTimer);
  for (const link of document.querySelectorAll("header nav a")) {
    const path = window.location.pathname.replace(/^\/console\/?$/, "/console/jobs");
    const current = path.startsWith(link.getAttribute("href"));
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  await load(view, fragmentUrl(window.location));
  if (mine !== generation) return;
  const heading = view.querySelector("h1");
  document.title = heading ? `${heading.textContent.trim()} · Fetcher console` : "Fetcher console";
  if (focus) view.focus();
  scheduleRefresh(mine);
}

function go(path) {
  history.pushState(null, "", path);
  navigate();
}

async function download(url, name) {
  const response = await call(url, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    say(`The download failed (HTTP ${response.status}).`);
    return;
  }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

document.addEventListener("click", async (event) => {
  const saved = event.target.closest("a[data-download-json]");
  if (saved) {
    event.preventDefault();
    await download(saved.getAttribute("href"), `${saved.getAttribute("href").split("/").slice(-2).join("-")}.json`);
    return;
  }
  const link = event.target.closest("a[href]");
  if (link && !event.defaultPrevented && event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
    const url = new URL(link.href, window.location.href);
    if (url.origin === window.location.origin && url.pathname.startsWith("/console") && !link.hasAttribute("download")) {
      event.preventDefault();
      go(url.pathname + url.search);
      return;
    }
  }
  const button = event.target.closest("button[data-post]");
  if (button) {
    const target = document.getElementById(button.dataset.into);
    button.disabled = true;
    target.replaceChildren(Object.assign(document.createElement("span"), { className: "muted", textContent: "Working…" }));
    try {
      const response = await call(button.dataset.post, { method: "POST" });
      if (response.ok) target.innerHTML = await response.text();
      else target.replaceChildren(await failure(response));
    } catch {
      target.textContent = "The service could not be reached.";
    } finally {
      button.disabled = false;
    }
  }
});

function formQuery(form) {
  const query = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (String(value).trim()) query.append(name, String(value).trim());
  }
  return query.toString();
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.dataset.view) {
    event.preventDefault();
    const query = formQuery(form);
    go(query ? `${form.dataset.view}?${query}` : form.dataset.view);
  } else if (form.dataset.open) {
    event.preventDefault();
    const id = new FormData(form).get("id").trim();
    if (id) go(form.dataset.open.replace("{id}", encodeURIComponent(id)));
  } else if (form.dataset.download) {
    event.preventDefault();
    const query = formQuery(form);
    await download(query ? `${form.dataset.download}?${query}` : form.dataset.download, "fetcher-audit-bundle.jsonl");
  }
});

window.addEventListener("popstate", () => navigate());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") scheduleRefresh(generation);
});

// Signing in: the authorisation code flow with PKCE (RFC 7636) at the configured issuer.

function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function discovery() {
  const response = await fetch(`${config.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`the issuer answered HTTP ${response.status}`);
  return response.json();
}

async function signIn() {
  const issuer = await discovery();
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  // Only the verifier and state wait for the way back (the token never touches storage).
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state, back: window.location.pathname + window.location.search }));
  const url = new URL(issuer.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: config.clientId,
    redirect_uri: window.location.origin + CALLBACK,
    scope: "openid",
    state,
    code_challenge: base64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
  }).toString();
  window.location.assign(url.toString());
}

async function finishSignIn() {
  const params = new URLSearchParams(window.location.search);
  const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) || "null");
  sessionStorage.removeItem(PKCE_KEY);
  // The code leaves the address bar (and the history) at once.
  history.replaceState(null, "", saved && saved.back && saved.back !== CALLBACK ? saved.back : "/console/jobs");
  if (!saved || params.get("state") !== saved.state || !params.get("code")) {
    say(params.get("error_description") || params.get("error") || "The sign-in did not complete; try again.");
    return;
  }
  const issuer = await discovery();
  const response = await fetch(issuer.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: window.location.origin + CALLBACK,
      client_id: config.clientId,
      code_verifier: saved.verifier,
    }),
  });
  const answer = response.ok ? await response.json() : null;
  if (!answer || typeof answer.access_token !== "string") {
    say(`The issuer refused the sign-in (HTTP ${response.status}).`);
    return;
  }
  token = answer.access_token;
}

signInButton.addEventListener("click", () => signIn().catch((error) => say(`Sign-in failed: ${error.message}`)));
signOutButton.addEventListener("click", () => {
  token = null;
  showSession();
  navigate();
});

async function start() {
  if (window.location.pathname === CALLBACK) {
    try {
      await finishSignIn();
    } catch (error) {
      say(`Sign-in failed: ${error.message}`);
    }
  }
  showSession();
  await navigate({ focus: false });
}

start();
