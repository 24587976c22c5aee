// AdTally dashboard (docs/DASHBOARD.md): plain JavaScript, no library, no build step.
//
// The page holds no data. It asks for a token with the `reports` scope or an advertiser key (API
// 1.5, `atk_…`: the same requests then answer that advertiser's ads only), keeps it in sessionStorage
// (this tab only), and reads everything from the JSON reports API with `Authorization: Bearer`:
// two requests per view, made together. GET v1/reports/ads?granularity=day&tz=..., whose per-ad
// per-day rows give the chart per day (summed by bucket_start), the reasons (summed over
// rejections and duplicates) and the table (summed per ad); and GET v1/reports/credits for the
// same range, zone and advertiser (API 1.4), whose rows (one per adjustment and ad) give the
// credits issued in the range, their totals and the net beside the billable totals. The CSV
// buttons fetch the same listings as CSV with the same header and hand them to the browser as a
// blob: download. Charts are SVG drawn here, with classes only (the Content-Security-Policy allows
// no inline style).
'use strict';

(function () {
  const TOKEN_KEY = 'adtally.reportToken';
  const REQUEST_TIMEOUT_MS = 30000;
  const LONGEST_RANGE_DAYS = 366;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // The reasons an event is not billed (API 1.3): the app's bugs that AdTally refused, apart from
  // the invalid traffic it filtered. Words for people, codes for the developers.
  const BUG_REASONS = [
    ['impression_already_counted', 'Impression counted already', 'the same ad seen again in the session: scrolled back, reloaded'],
    ['click_within_window', 'Repeat click within the window', 'the same ad clicked again within the click window'],
    ['simultaneous_click', 'Taps piled up on a reused cell', 'a click on another ad in the same instant as the one billed'],
    ['ad_not_in_feed', 'Click on an ad not in the feed', 'the ad is not in the session\'s current feed'],
    ['stale_snapshot', 'Click naming an old feed', 'the click names a feed snapshot other than the current one'],
    ['position_mismatch', 'Click naming the wrong row', 'the click names another row than the ad\'s'],
    ['not_viewable', 'Impression not viewable', 'under half of the ad visible, or for under a second'],
    ['ad_not_served', 'Impression of an ad not served', 'no feed of the session held the ad'],
  ];
  const INVALID_REASONS = [
    ['no_impression', 'Click without an impression', 'no counted impression of the ad in the session before the click'],
    ['click_limit_exceeded', 'Over the hourly click limit', 'the session billed its most clicks for the hour already'],
    ['bot_agent', 'Bot or crawler', 'the user agent is a known bot or crawler'],
    ['blocked_address', 'Blocked address', 'the client address is on the block list'],
  ];
  // Why a credit was issued (API 1.4): words for people, the code beside them.
  const CREDIT_REASONS = {
    sivt: 'Invalid traffic found by a review',
    advertiser_dispute: 'Advertiser dispute',
    operator_error: 'Operator error',
  };
  // Older names that browsers still report for some zones; AdTally is sent the current IANA name.
  const ZONE_ALIASES = {
    'Asia/Calcutta': 'Asia/Kolkata', 'Asia/Saigon': 'Asia/Ho_Chi_Minh', 'Asia/Katmandu': 'Asia/Kathmandu',
    'Asia/Rangoon': 'Asia/Yangon', 'Europe/Kiev': 'Europe/Kyiv', 'Atlantic/Faeroe': 'Atlantic/Faroe',
    'America/Buenos_Aires': 'America/Argentina/Buenos_Aires', 'America/Indianapolis': 'America/Indiana/Indianapolis',
    'America/Louisville': 'America/Kentucky/Louisville', 'Pacific/Enderbury': 'Pacific/Kanton', 'Etc/UTC': 'UTC',
    'Etc/GMT': 'UTC', 'GMT': 'UTC', 'UCT': 'UTC', 'Etc/UCT': 'UTC', 'Etc/Universal': 'UTC', 'Universal': 'UTC', 'Zulu': 'UTC',
  };
  const COMMON_ZONES = [
    'UTC', 'America/Los_Angeles', 'America/Denver', 'America/Chicago', 'America/New_York', 'America/Sao_Paulo',
    'Europe/London', 'Europe/Paris', 'Europe/Berlin', 'Europe/Helsinki', 'Europe/Moscow', 'Africa/Lagos',
    'Africa/Johannesburg', 'Asia/Dubai', 'Asia/Kolkata', 'Asia/Singapore', 'Asia/Shanghai', 'Asia/Tokyo',
    'Australia/Sydney', 'Pacific/Auckland', 'Pacific/Kiritimati', 'Pacific/Pago_Pago',
  ];

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- time zones and local days

  const formatters = new Map();
  function wallFormatter(tz) {
    let formatter = formatters.get(tz);
    if (!formatter) {
      formatter = new Intl.DateTimeFormat('en-US', {
        timeZone: tz, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit',
      });
      formatters.set(tz, formatter);
    }
    return formatter;
  }

  // The wall clock in `tz` at instant `ms` (milliseconds since the epoch).
  function wallClock(ms, tz) {
    const parts = {};
    for (const part of wallFormatter(tz).formatToParts(new Date(ms))) parts[part.type] = part.value;
    return {
      year: Number(parts.year), month: Number(parts.month), day: Number(parts.day),
      hour: Number(parts.hour) % 24, minute: Number(parts.minute), second: Number(parts.second),
    };
  }

  // The zone's offset from UTC at instant `ms`, in milliseconds (whole seconds).
  function offsetAt(ms, tz) {
    const w = wallClock(ms, tz);
    const wall = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
    return wall - Math.floor(ms / 1000) * 1000;
  }

  function pad(n, width) { return String(n).padStart(width || 2, '0'); }

  // The local date at instant `ms` in `tz`, as YYYY-MM-DD.
  function localDate(ms, tz) {
    const w = wallClock(ms, tz);
    return pad(w.year, 4) + '-' + pad(w.month) + '-' + pad(w.day);
  }

  function parseDate(text) {
    const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text || '');
    if (!match) return null;
    const ms = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
    const back = new Date(ms);
    if (back.getUTCDate() !== Number(match[3])) return null; // 2026-02-30
    return ms;
  }

  function addDays(date, days) {
    return new Date(parseDate(date) + days * 86400000).toISOString().slice(0, 10);
  }

  function daysBetween(from, to) { return Math.round((parseDate(to) - parseDate(from)) / 86400000); }

  // The first instant of local date `date` (YYYY-MM-DD) in `tz`, in milliseconds since the epoch.
  // Correct across daylight saving time, including the zones whose clocks jump at midnight (the day
  // then starts at 01:00): the candidates are local midnight under each offset in force around it,
  // and the start is the candidate on that date whose previous second is on the day before.
  function startOfLocalDay(date, tz) {
    const midnight = parseDate(date);
    const candidates = new Set();
    for (const probe of [midnight - 86400000, midnight - 43200000, midnight, midnight + 43200000, midnight + 86400000]) {
      const candidate = midnight - offsetAt(probe, tz);
      candidates.add(candidate);
      candidates.add(midnight - offsetAt(candidate, tz));
    }
    let earliestOnDate = null;
    for (const candidate of [...candidates].sort((a, b) => a - b)) {
      if (localDate(candidate, tz) !== date) continue;
      if (localDate(candidate - 1000, tz) !== date) return candidate;
      if (earliestOnDate === null) earliestOnDate = candidate;
    }
    return earliestOnDate !== null ? earliestOnDate : midnight;
  }

  function canonicalZone(tz) {
    const name = ZONE_ALIASES[tz] || tz;
    return zoneIsKnown(name) ? name : tz;
  }

  function browserZone() {
    try { return canonicalZone(Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'); } catch (e) { return 'UTC'; }
  }

  function zoneIsKnown(tz) {
    try { wallFormatter(tz); return true; } catch (e) { return false; }
  }

  // ---------------------------------------------------------------- formatting

  const integerFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
  const percentFormat = new Intl.NumberFormat(undefined, { style: 'percent', minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const dayLabelFormat = new Intl.DateTimeFormat(undefined, { timeZone: 'UTC', weekday: 'short', day: 'numeric', month: 'short' });
  const dayShortFormat = new Intl.DateTimeFormat(undefined, { timeZone: 'UTC', day: 'numeric', month: 'short' });
  const rangeFormat = new Intl.DateTimeFormat(undefined, { timeZone: 'UTC', day: 'numeric', month: 'short', year: 'numeric' });

  function formatCount(n) { return integerFormat.format(n); }
  function formatCTR(ctr) { return ctr === null || ctr === undefined ? '–' : percentFormat.format(ctr); }
  function dayLabel(date) { return dayLabelFormat.format(new Date(parseDate(date))); }
  function dayShort(date) { return dayShortFormat.format(new Date(parseDate(date))); }

  // clicks / impressions rounded to 6 decimal places, as the API computes it; null without impressions.
  function ctrOf(clicks, impressions) {
    if (!impressions) return null;
    return Math.round((clicks / impressions) * 1e6) / 1e6;
  }

  function formatInstant(ms, tz) {
    const w = wallClock(ms, tz);
    return pad(w.year, 4) + '-' + pad(w.month) + '-' + pad(w.day) + ' ' + pad(w.hour) + ':' + pad(w.minute) + ':' + pad(w.second);
  }

  // ---------------------------------------------------------------- the token

  function storedToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function storeToken(token) {
    try { sessionStorage.setItem(TOKEN_KEY, token); } catch (e) { /* private mode: kept in memory only */ }
    memoryToken = token;
  }
  function forgetToken() {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* nothing stored */ }
    memoryToken = '';
  }
  let memoryToken = '';
  function currentToken() { return storedToken() || memoryToken; }
  // An advertiser's key: AdTally answers its own ads only, whatever the page asks.
  function signedInWithKey() { return currentToken().startsWith('atk_'); }

  // ---------------------------------------------------------------- the API

  class ReportError extends Error {
    constructor(kind, status, code, message, retryAfter, requestID) {
      super(message || kind);
      this.kind = kind; // 'network', 'timeout', 'http', 'format'
      this.status = status || 0;
      this.code = code || '';
      this.serverMessage = message || '';
      this.retryAfter = retryAfter;
      this.requestID = requestID || '';
    }
  }

  function queryString(params) {
    return Object.keys(params)
      .filter((key) => params[key] !== undefined && params[key] !== null && params[key] !== '')
      .map((key) => encodeURIComponent(key) + '=' + encodeURIComponent(params[key]))
      .join('&');
  }

  // GETs a path relative to the page (so `v1/reports/ads` is /v1/reports/ads next to /dashboard)
  // with the token; resolves to the body as text, or rejects with a ReportError.
  async function apiGet(path, params, accept) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    try {
      let response;
      try {
        response = await fetch(path + '?' + queryString(params), {
          method: 'GET',
          headers: { Authorization: 'Bearer ' + currentToken(), Accept: accept },
          cache: 'no-store',
          credentials: 'omit',
          redirect: 'error',
          referrerPolicy: 'no-referrer',
          signal: controller.signal,
        });
      } catch (e) {
        throw new ReportError(controller.signal.aborted ? 'timeout' : 'network');
      }
      let body;
      try {
        body = await response.text();
      } catch (e) {
        throw new ReportError(controller.signal.aborted ? 'timeout' : 'network');
      }
      if (!response.ok) {
        let code = '';
        let message = '';
        try {
          const error = JSON.parse(body).error;
          code = String(error.code || '');
          message = String(error.message || '');
        } catch (e) { /* not the error shape (a proxy's page): the status says enough */ }
        const retry = Number.parseInt(response.headers.get('Retry-After') || '', 10);
        throw new ReportError('http', response.status, code, message, Number.isFinite(retry) ? retry : null,
                              response.headers.get('X-Request-Id'));
      }
      return { body, headers: response.headers };
    } finally {
      clearTimeout(timer);
    }
  }

  // ---------------------------------------------------------------- the view's state

  const view = { range: '7', from: '', to: '', tz: 'UTC', advertiser: '' };
  let data = null; // the last listing, digested
  let sort = { key: 'impressions', direction: 'descending' };
  let generation = 0; // answers to an older request are dropped

  function today(tz) { return localDate(Date.now(), tz); }

  // The dates of a preset range, in the view's zone.
  function presetDates(preset, tz) {
    const t = today(tz);
    if (preset === 'month') return [t.slice(0, 8) + '01', t];
    if (preset === 'last-month') {
      const firstOfThis = t.slice(0, 8) + '01';
      const lastOfPrevious = addDays(firstOfThis, -1);
      return [lastOfPrevious.slice(0, 8) + '01', lastOfPrevious];
    }
    const days = Number(preset) || 7;
    return [addDays(t, 1 - days), t];
  }

  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ''));
    const tz = params.get('tz');
    if (tz && zoneIsKnown(tz)) view.tz = tz;
    const from = params.get('from');
    const to = params.get('to');
    if (from && to && parseDate(from) !== null && parseDate(to) !== null && from <= to &&
        daysBetween(from, to) < LONGEST_RANGE_DAYS) {
      view.range = 'custom'; view.from = from; view.to = to;
    } else if (['7', '30', '1', 'month', 'last-month'].includes(params.get('range'))) {
      view.range = params.get('range');
    }
    const advertiser = params.get('advertiser') || '';
    view.advertiser = /^[A-Za-z0-9._:~-]{1,128}$/.test(advertiser) ? advertiser : '';
  }

  function writeHash() {
    const params = { tz: view.tz, advertiser: view.advertiser };
    if (view.range === 'custom') { params.from = view.from; params.to = view.to; } else { params.range = view.range; }
    history.replaceState(null, '', '#' + queryString(params));
  }

  // ---------------------------------------------------------------- screens

  function showSignIn(message) {
    $('dashboard').hidden = true;
    $('sign-out').hidden = true;
    $('sign-in').hidden = false;
    $('sign-in-error').textContent = message || '';
    const input = $('token');
    input.value = '';
    input.setAttribute('aria-invalid', message ? 'true' : 'false');
    input.focus();
  }

  function showDashboard() {
    $('sign-in').hidden = true;
    $('dashboard').hidden = false;
    $('sign-out').hidden = false;
    // Whose ads the view shows depends on the credential: a key sees its advertiser's only.
    $('range-label').textContent = rangeLabel();
  }

  // What the page learnt from one credential's answers, forgotten before another's: the
  // advertisers seen (an advertiser's key must not find the publisher's other advertisers here).
  function forgetData() {
    data = null;
    $('content').hidden = true;
    $('advertisers').replaceChildren();
  }

  function setProblem(text, canRetry) {
    $('problem').hidden = !text;
    $('problem-text').textContent = text || '';
    $('retry').hidden = !canRetry;
  }

  function setStatus(text) { $('status').textContent = text; }

  function describe(error) {
    const id = error.requestID ? ' (request ' + error.requestID + ')' : '';
    if (error.kind === 'network') return 'AdTally cannot be reached. Check the network connection, or whether AdTally is running, then try again.';
    if (error.kind === 'timeout') return 'AdTally did not answer within ' + (REQUEST_TIMEOUT_MS / 1000) + ' seconds. Try again, or a shorter range.';
    if (error.kind === 'format') return 'AdTally sent an answer this page does not understand. Reload the page; if it persists, tell whoever runs AdTally.';
    switch (error.status) {
      case 400: return 'AdTally refused the request: ' + (error.serverMessage || 'a parameter is out of form') + (error.code ? ' (' + error.code + ')' : '');
      case 401: return signedInWithKey()
        ? 'That advertiser key was not accepted: it may have been revoked. Check it, or ask for a new one.'
        : 'That token was not accepted. Check it and enter it again.';
      case 403: return signedInWithKey()
        ? 'That advertiser key may not read this: ' + (error.serverMessage || 'it lacks the reports scope') + ' Clear the advertiser filter, or ask for a key with the reports scope.'
        : 'That token is known, but it may not read reports: it lacks the reports scope. Ask for a token with the reports scope.';
      case 404: return 'This AdTally has no reports API at this address. Open the dashboard from the AdTally server itself.';
      case 429: return 'AdTally is answering too many requests right now' +
        (error.retryAfter !== null && error.retryAfter !== undefined ? ': try again in ' + error.retryAfter + ' s.' : '. Try again shortly.');
      case 503: return 'AdTally cannot answer for the moment (its database is unreachable, or it is overloaded)' +
        (error.retryAfter !== null && error.retryAfter !== undefined ? ': try again in ' + error.retryAfter + ' s.' : '. Try again shortly.');
      default:
        if (error.status >= 500) return 'AdTally failed to answer (HTTP ' + error.status + ')' + id + '. Try again; if it persists, tell whoever runs AdTally.';
        return 'AdTally answered HTTP ' + error.status + (error.serverMessage ? ': ' + error.serverMessage : '') + id + '.';
    }
  }

  // ---------------------------------------------------------------- filters

  function fillZones() {
    const select = $('tz');
    const browser = browserZone();
    const seen = new Set();
    const common = document.createElement('optgroup');
    common.label = 'Common';
    function option(zone, label) {
      const element = document.createElement('option');
      element.value = zone;
      element.textContent = label || zone.replace(/_/g, ' ');
      return element;
    }
    const first = [browser, 'UTC'];
    if (!first.includes(view.tz)) first.push(view.tz);
    for (const zone of first.concat(COMMON_ZONES)) {
      if (seen.has(zone) || !zoneIsKnown(zone)) continue;
      seen.add(zone);
      common.appendChild(option(zone, zone === browser ? zone.replace(/_/g, ' ') + ' (this browser)' : null));
    }
    select.appendChild(common);
    let all = [];
    try { all = Intl.supportedValuesOf('timeZone'); } catch (e) { all = []; }
    const rest = document.createElement('optgroup');
    rest.label = 'All time zones';
    for (const zone of all.map(canonicalZone)) {
      if (seen.has(zone)) continue;
      seen.add(zone);
      rest.appendChild(option(zone));
    }
    if (rest.children.length) select.appendChild(rest);
  }

  function syncFilters() {
    if (view.range !== 'custom') [view.from, view.to] = presetDates(view.range, view.tz);
    $('range').value = view.range;
    $('from').value = view.from;
    $('to').value = view.to;
    $('tz').value = view.tz;
    $('advertiser').value = view.advertiser;
    $('range-label').textContent = rangeLabel();
  }

  function rangeLabel() {
    const from = rangeFormat.format(new Date(parseDate(view.from)));
    const to = rangeFormat.format(new Date(parseDate(view.to)));
    return (view.from === view.to ? from : from + ' – ' + to) + ' · ' + view.tz.replace(/_/g, ' ') +
      ' · ' + (view.advertiser ? 'advertiser ' + view.advertiser : signedInWithKey() ? 'your ads' : 'all advertisers');
  }

  // Reads the form into the view; returns a message when something is out of form.
  function readFilters(changed) {
    const range = $('range').value;
    const tz = $('tz').value;
    if (!zoneIsKnown(tz)) return 'That time zone is not known to this browser.';
    const advertiser = $('advertiser').value.trim();
    if (advertiser && !/^[A-Za-z0-9._:~-]{1,128}$/.test(advertiser)) {
      return 'An advertiser id is 1 to 128 characters from A-Z a-z 0-9 . _ : ~ -';
    }
    if (changed === 'from' || changed === 'to') {
      view.range = 'custom';
    } else {
      view.range = range;
    }
    view.tz = tz;
    view.advertiser = advertiser;
    if (view.range === 'custom') {
      const from = $('from').value;
      const to = $('to').value;
      if (parseDate(from) === null || parseDate(to) === null) return 'Enter both dates of the range.';
      if (to < from) return 'The range ends before it starts.';
      if (daysBetween(from, to) + 1 > LONGEST_RANGE_DAYS) return 'Choose at most ' + LONGEST_RANGE_DAYS + ' days.';
      view.from = from; view.to = to;
    }
    return '';
  }

  function onFiltersChanged(event) {
    if (event) event.preventDefault();
    const problem = readFilters(event && event.target ? event.target.id : '');
    if (problem) { setProblem(problem, false); return; }
    syncFilters();
    writeHash();
    load();
  }

  // ---------------------------------------------------------------- loading

  function requestParams(format, granularity) {
    const from = startOfLocalDay(view.from, view.tz);
    const to = startOfLocalDay(addDays(view.to, 1), view.tz);
    return {
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      tz: view.tz,
      granularity: granularity,
      advertiser_id: view.advertiser,
      format: format,
    };
  }

  // The credits issued in the same local days, zone and advertiser (by created_at).
  function creditParams(format) {
    const params = requestParams(format);
    delete params.granularity;
    return params;
  }

  // The credits of the view, or null from an AdTally before API 1.4 (it has no such report: 404).
  async function loadCredits(params) {
    let answer;
    try {
      answer = await apiGet('v1/reports/credits', params, 'application/json');
    } catch (error) {
      if (error instanceof ReportError && error.kind === 'http' && error.status === 404) return null;
      throw error;
    }
    let listing;
    try { listing = JSON.parse(answer.body); } catch (e) { throw new ReportError('format'); }
    if (!listing || !Array.isArray(listing.rows)) throw new ReportError('format');
    return digestCredits(listing, params);
  }

  async function load() {
    const mine = ++generation;
    setProblem('', false);
    setStatus('Loading…');
    $('content').setAttribute('aria-busy', 'true');
    const params = requestParams('json', 'day');
    try {
      const [answer, credits] = await Promise.all([
        apiGet('v1/reports/ads', params, 'application/json'),
        loadCredits(creditParams('json')),
      ]);
      if (mine !== generation) return;
      let listing;
      try { listing = JSON.parse(answer.body); } catch (e) { throw new ReportError('format'); }
      if (!listing || !Array.isArray(listing.rows)) throw new ReportError('format');
      data = digest(listing, params);
      data.credits = credits;
      $('content').hidden = false;
      render();
      const finalBefore = Date.parse(listing.final_before);
      setStatus('Updated ' + formatInstant(Date.now(), view.tz) +
        (Number.isFinite(finalBefore) ? '. Every event received before ' + formatInstant(finalBefore, view.tz) + ' is counted; days that end before then are final.' : '.'));
    } catch (error) {
      if (mine !== generation) return;
      if (!(error instanceof ReportError)) { console.warn(error); error = new ReportError('format'); }
      handleError(error);
    } finally {
      if (mine === generation) $('content').setAttribute('aria-busy', 'false');
    }
  }

  function handleError(error) {
    setStatus('');
    // An advertiser's key asking for another advertiser: the key is good, the filter is not.
    if (error.kind === 'http' && error.status === 403 && signedInWithKey() && view.advertiser) {
      data = null;
      $('content').hidden = true;
      setProblem(describe(error), false);
      return;
    }
    if (error.kind === 'http' && (error.status === 401 || error.status === 403)) {
      forgetToken();
      data = null;
      $('content').hidden = true;
      showSignIn(describe(error));
      return;
    }
    setProblem(describe(error), true);
  }

  // The listing's day rows, summed per day, per reason and per ad.
  function digest(listing, params) {
    const tz = view.tz;
    const rangeEnd = Date.parse(params.to);
    const finalBefore = Date.parse(listing.final_before);
    const days = new Map();
    const ads = new Map();
    const reasons = {};
    let reasonsReported = false;
    for (const [code] of BUG_REASONS.concat(INVALID_REASONS)) reasons[code] = 0;
    for (const row of listing.rows) {
      const date = typeof row.bucket_start === 'string' ? row.bucket_start.slice(0, 10) : view.from;
      // A bucket is final when its end, clipped to the range, is at or before final_before; the API
      // says so in `final`, and this computes the same when an older server does not.
      let final = row.final;
      if (typeof final !== 'boolean') {
        const end = Math.min(startOfLocalDay(addDays(date, 1), tz), rangeEnd);
        final = Number.isFinite(finalBefore) && end <= finalBefore;
      }
      let day = days.get(date);
      if (!day) { day = { date, impressions: 0, clicks: 0, final: true }; days.set(date, day); }
      day.impressions += row.impressions || 0;
      day.clicks += row.clicks || 0;
      day.final = day.final && final;

      let ad = ads.get(row.ad_id);
      if (!ad) {
        ad = { ad_id: row.ad_id, advertiser_id: row.advertiser_id, impressions: 0, clicks: 0,
               duplicate_impressions: 0, rejected_impressions: 0, duplicate_clicks: 0, rejected_clicks: 0 };
        ads.set(row.ad_id, ad);
      }
      for (const key of ['impressions', 'clicks', 'duplicate_impressions', 'rejected_impressions', 'duplicate_clicks', 'rejected_clicks']) {
        ad[key] += row[key] || 0;
      }
      for (const group of [row.rejections, row.duplicates]) {
        if (!group || typeof group !== 'object') continue;
        reasonsReported = true;
        for (const code of Object.keys(group)) reasons[code] = (reasons[code] || 0) + (group[code] || 0);
      }
    }
    // An ad's total over the range is final when the range ends at or before final_before, as a
    // granularity=total listing would say.
    const rangeFinal = Number.isFinite(finalBefore) && rangeEnd <= finalBefore;
    const adList = [...ads.values()].map((ad) => Object.assign(ad, {
      ctr: ctrOf(ad.clicks, ad.impressions),
      impressions_not_billed: ad.duplicate_impressions + ad.rejected_impressions,
      clicks_not_billed: ad.duplicate_clicks + ad.rejected_clicks,
      final: rangeFinal,
    }));
    const dayList = [...days.values()].sort((a, b) => (a.date < b.date ? -1 : 1));
    for (const day of dayList) day.ctr = ctrOf(day.clicks, day.impressions);
    return { days: dayList, ads: adList, reasons, reasonsReported, finalBefore, rangeFinal,
             from: view.from, to: view.to, tz };
  }

  // The credits listing's rows as they come (sorted by created_at, adjustment_id, ad_id), and their
  // totals. They are final, as the listing says, when the range ends at or before final_before: no
  // credit can be issued in it any more.
  function digestCredits(listing, params) {
    const rows = [];
    let impressions = 0;
    let clicks = 0;
    for (const row of listing.rows) {
      if (!row || typeof row.adjustment_id !== 'string') throw new ReportError('format');
      const createdAt = Date.parse(row.created_at);
      if (!Number.isFinite(createdAt)) throw new ReportError('format');
      const credit = {
        adjustment_id: row.adjustment_id, reason: String(row.reason || ''), created_at: createdAt,
        ad_id: String(row.ad_id || ''), advertiser_id: row.advertiser_id || '',
        impressions: row.credited_impressions || 0, clicks: row.credited_clicks || 0,
      };
      impressions += credit.impressions;
      clicks += credit.clicks;
      rows.push(credit);
    }
    const finalBefore = Date.parse(listing.final_before);
    const final = Number.isFinite(finalBefore) && Date.parse(params.to) <= finalBefore;
    return { rows, impressions, clicks, final };
  }

  // ---------------------------------------------------------------- rendering

  function render() {
    if (!data) return;
    const totals = data.ads.reduce((sum, ad) => {
      sum.impressions += ad.impressions;
      sum.clicks += ad.clicks;
      sum.notBilled += ad.impressions_not_billed + ad.clicks_not_billed;
      return sum;
    }, { impressions: 0, clicks: 0, notBilled: 0 });
    $('total-impressions').textContent = formatCount(totals.impressions);
    $('total-clicks').textContent = formatCount(totals.clicks);
    $('total-ctr').textContent = formatCTR(ctrOf(totals.clicks, totals.impressions));
    $('total-not-billed').textContent = formatCount(totals.notBilled);
    renderNet(totals);
    renderDaily();
    renderDailyTable();
    renderReasons();
    renderAdvertisers();
    renderTable();
    renderCredits(totals);
  }

  // Beside each billable total: the credits issued in the range, and the net (billable − credited).
  function renderNet(totals) {
    const credits = data.credits;
    for (const key of ['impressions', 'clicks']) {
      const note = $('net-' + key);
      note.hidden = !credits;
      note.textContent = credits ? 'credited ' + formatCount(credits[key]) + ' · net ' + formatCount(totals[key] - credits[key]) : '';
    }
  }

  function reasonCell(code) {
    const td = document.createElement('td');
    td.textContent = CREDIT_REASONS[code] || code;
    if (CREDIT_REASONS[code]) {
      const codeText = document.createElement('code');
      codeText.className = 'reason-code';
      codeText.textContent = code;
      td.append(' ', codeText);
    }
    return td;
  }

  // The credits issued in the range: billable, credited and net per measure, and one row per
  // adjustment and ad, issued at in the view's zone; an empty state when there are none.
  function renderCredits(totals) {
    const credits = data.credits;
    const known = credits !== null && credits !== undefined;
    $('credit-lines').hidden = !known;
    $('download-credits-csv').hidden = !known;
    const note = $('credits-note');
    note.hidden = known;
    note.textContent = 'This AdTally does not report credits (API 1.4 adds them): the counts above are before any credit.';
    const body = $('credits-table').tBodies[0];
    body.textContent = '';
    if (!known) {
      $('credits-scroll').hidden = true;
      $('credits-empty').hidden = true;
      $('credits-open').hidden = true;
      return;
    }
    for (const key of ['impressions', 'clicks']) {
      $('credit-billable-' + key).textContent = formatCount(totals[key]);
      $('credit-' + key).textContent = formatCount(credits[key]);
      $('credit-net-' + key).textContent = formatCount(totals[key] - credits[key]);
    }
    $('credits-issued-head').textContent = 'Issued at (' + data.tz.replace(/_/g, ' ') + ')';
    for (const credit of credits.rows) {
      const tr = document.createElement('tr');
      tr.dataset.adjustment = credit.adjustment_id;
      tr.dataset.ad = credit.ad_id;
      tr.dataset.reason = credit.reason;
      const ad = cell(credit.ad_id, 'ad');
      if (credit.advertiser_id) ad.title = 'advertiser ' + credit.advertiser_id;
      tr.append(
        cell(credit.adjustment_id, 'ad'),
        reasonCell(credit.reason),
        cell(formatInstant(credit.created_at, data.tz)),
        ad,
        cell(formatCount(credit.impressions), 'num'),
        cell(formatCount(credit.clicks), 'num'),
      );
      body.appendChild(tr);
    }
    $('credits-scroll').hidden = credits.rows.length === 0;
    $('credits-empty').hidden = credits.rows.length > 0;
    $('credits-open').hidden = credits.final;
  }

  function svgElement(name, attributes, text) {
    const element = document.createElementNS(SVG_NS, name);
    for (const key of Object.keys(attributes || {})) element.setAttribute(key, attributes[key]);
    if (text !== undefined) element.textContent = text;
    return element;
  }

  function chartWidth(container) {
    return Math.max(280, Math.floor(container.clientWidth || container.getBoundingClientRect().width || 640));
  }

  // Billable impressions, clicks and CTR per local day: three bands over one axis of every day in
  // the range, a bar group for each day that has data; days not final yet are hatched, and say so.
  function renderDaily() {
    const container = $('daily-chart');
    container.textContent = '';
    const allDays = [];
    for (let date = data.from; date <= data.to; date = addDays(date, 1)) allDays.push(date);
    if (!data.days.length) {
      const empty = document.createElement('p');
      empty.className = 'empty';
      empty.textContent = 'No billable or refused event in this range.';
      container.appendChild(empty);
      return;
    }
    const width = chartWidth(container);
    const left = 8;
    const right = 8;
    const bandHeight = 96;
    const bandGap = 30;
    const top = 22;
    const bands = [
      { key: 'impressions', title: 'Billable impressions', format: formatCount },
      { key: 'clicks', title: 'Billable clicks', format: formatCount },
      { key: 'ctr', title: 'CTR', format: formatCTR },
    ];
    const axisHeight = 44;
    const height = top + bands.length * (bandHeight + bandGap) - bandGap + axisHeight;
    const slot = (width - left - right) / allDays.length;
    const barWidth = Math.max(1, Math.min(56, slot * 0.68));
    const showValues = slot >= 46;
    const labelEvery = Math.max(1, Math.ceil(64 / slot));
    const byDate = new Map(data.days.map((day) => [day.date, day]));

    const svg = svgElement('svg', {
      viewBox: '0 0 ' + width + ' ' + height, width: String(width), height: String(height),
      role: 'img', 'aria-labelledby': 'daily-title',
      'aria-describedby': 'daily-legend',
    });
    const desc = svgElement('desc', {}, data.days.map((day) => dayLabel(day.date) + ': ' + formatCount(day.impressions) +
      ' impressions, ' + formatCount(day.clicks) + ' clicks, CTR ' + formatCTR(day.ctr) + (day.final ? '' : ', not final')).join('; '));
    svg.appendChild(desc);

    bands.forEach((band, index) => {
      const y0 = top + index * (bandHeight + bandGap);
      const max = Math.max(...data.days.map((day) => day[band.key] || 0));
      svg.appendChild(svgElement('text', { x: String(left), y: String(y0 - 8), class: 'band-title ' + band.key }, band.title));
      if (max > 0) {
        svg.appendChild(svgElement('text', { x: String(width - right), y: String(y0 - 8), 'text-anchor': 'end', class: 'axis-label' }, 'max ' + band.format(max)));
      }
      svg.appendChild(svgElement('line', { x1: String(left), x2: String(width - right), y1: String(y0 + bandHeight), y2: String(y0 + bandHeight), class: 'baseline' }));
      svg.appendChild(svgElement('line', { x1: String(left), x2: String(width - right), y1: String(y0), y2: String(y0), class: 'grid' }));
    });

    allDays.forEach((date, i) => {
      const x = left + i * slot + (slot - barWidth) / 2;
      const center = left + i * slot + slot / 2;
      const day = byDate.get(date);
      if (day) {
        const group = svgElement('g', { class: 'day-group', 'data-day': date, 'data-final': String(day.final) });
        group.appendChild(svgElement('title', {}, dayLabel(date) + (day.final ? '' : ' (not final yet)') + ': ' +
          formatCount(day.impressions) + ' impressions, ' + formatCount(day.clicks) + ' clicks, CTR ' + formatCTR(day.ctr)));
        bands.forEach((band, index) => {
          const y0 = top + index * (bandHeight + bandGap);
          const value = day[band.key] || 0;
          const max = Math.max(...data.days.map((d) => d[band.key] || 0));
          const h = max > 0 ? Math.max(value > 0 ? 2 : 0, (value / max) * (bandHeight - 16)) : 0;
          group.appendChild(svgElement('rect', {
            x: x.toFixed(1), y: (y0 + bandHeight - h).toFixed(1), width: barWidth.toFixed(1), height: h.toFixed(1),
            rx: String(Math.min(3, barWidth / 4)), class: 'bar ' + band.key + (day.final ? '' : ' open'),
            'data-series': band.key, 'data-value': String(band.key === 'ctr' ? (day.ctr === null ? '' : day.ctr) : value),
          }));
          if (showValues) {
            group.appendChild(svgElement('text', {
              x: center.toFixed(1), y: (y0 + bandHeight - h - 4).toFixed(1), 'text-anchor': 'middle', class: 'value',
            }, band.key === 'ctr' ? formatCTR(day.ctr) : formatCount(value)));
          }
        });
        if (!day.final) {
          group.appendChild(svgElement('text', {
            x: center.toFixed(1), y: String(height - 6), 'text-anchor': 'middle', class: 'open-mark',
          }, slot >= 60 ? 'not final' : '*'));
        }
        svg.appendChild(group);
      }
      if (i % labelEvery === 0 || (day && !day.final)) {
        svg.appendChild(svgElement('text', {
          x: center.toFixed(1), y: String(height - axisHeight + 18), 'text-anchor': 'middle', class: 'axis-label',
        }, slot >= 80 ? dayLabel(date) : dayShort(date)));
      }
    });
    container.appendChild(svg);
    if (data.days.some((day) => !day.final) && slot < 60) {
      const note = document.createElement('p');
      note.className = 'hint';
      note.textContent = '* not final yet: counts may still grow.';
      container.appendChild(note);
    }
  }

  function cell(text, className) {
    const td = document.createElement('td');
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function finalBadge(final) {
    const td = document.createElement('td');
    const badge = document.createElement('span');
    badge.className = 'badge ' + (final ? 'final' : 'open');
    badge.textContent = final ? 'Final' : 'Not final yet';
    td.appendChild(badge);
    return td;
  }

  function renderDailyTable() {
    const body = $('daily-table').tBodies[0];
    body.textContent = '';
    for (const day of data.days) {
      const tr = document.createElement('tr');
      tr.dataset.day = day.date;
      tr.append(cell(dayLabel(day.date)), cell(formatCount(day.impressions), 'num'), cell(formatCount(day.clicks), 'num'),
                cell(formatCTR(day.ctr), 'num'), finalBadge(day.final));
      body.appendChild(tr);
    }
  }

  // One horizontal bar per reason, zeros included (a zero is news too), on one scale for both groups.
  function renderReasons() {
    const max = Math.max(1, ...Object.values(data.reasons));
    drawReasons($('bugs-chart'), BUG_REASONS, 'bugs', max);
    drawReasons($('invalid-chart'), INVALID_REASONS, 'invalid', max);
    const sum = (list) => list.reduce((total, [code]) => total + (data.reasons[code] || 0), 0);
    $('bugs-total').textContent = '· ' + formatCount(sum(BUG_REASONS));
    $('invalid-total').textContent = '· ' + formatCount(sum(INVALID_REASONS));
    // A server before API 1.3 lists no reasons per row: say so rather than draw zeros.
    const unknown = !data.reasonsReported && data.ads.length > 0;
    document.querySelector('.reason-groups').hidden = unknown;
    const note = $('reasons-note');
    note.hidden = !unknown;
    note.textContent = 'This AdTally does not list the reasons per row: the counts per reason are not available.';
  }

  // Shortens `text` (an SVG text element) with an ellipsis until it fits `width`.
  function fitText(text, width) {
    if (text.getComputedTextLength() <= width) return;
    const full = text.textContent;
    let keep = full.length;
    while (keep > 4 && text.getComputedTextLength() > width) {
      keep -= 1;
      text.textContent = full.slice(0, keep).trimEnd() + '…';
    }
  }

  function drawReasons(container, reasons, group, max) {
    container.textContent = '';
    const width = chartWidth(container);
    const rowHeight = 46;
    const countWidth = 64;
    const trackWidth = width - countWidth;
    const height = reasons.length * rowHeight;
    const svg = svgElement('svg', {
      viewBox: '0 0 ' + width + ' ' + height, width: String(width), height: String(height), role: 'img',
      'aria-labelledby': group + '-title',
    });
    container.appendChild(svg); // in the document, so that text can be measured
    reasons.forEach(([code, label, explanation], index) => {
      const count = data.reasons[code] || 0;
      const y = index * rowHeight;
      const row = svgElement('g', { class: 'reason', 'data-reason': code, 'data-count': String(count) });
      row.appendChild(svgElement('title', {}, label + ': ' + explanation + ' (' + code + '): ' + formatCount(count)));
      const text = svgElement('text', { x: '0', y: String(y + 15), class: 'reason-label' + (count ? '' : ' zero') }, label);
      row.appendChild(text);
      const codeText = svgElement('text', { x: String(trackWidth), y: String(y + 15), 'text-anchor': 'end', class: 'reason-code' }, code);
      row.appendChild(codeText);
      row.appendChild(svgElement('rect', { x: '0', y: String(y + 22), width: trackWidth.toFixed(1), height: '10', rx: '3', class: 'reason-track' }));
      if (count > 0) {
        row.appendChild(svgElement('rect', {
          x: '0', y: String(y + 22), width: Math.max(3, (count / max) * trackWidth).toFixed(1), height: '10', rx: '3',
          class: 'reason-bar ' + group,
        }));
      }
      row.appendChild(svgElement('text', { x: String(width), y: String(y + 32), 'text-anchor': 'end', class: 'reason-count' }, formatCount(count)));
      svg.appendChild(row);
      // The code for the app's developers where there is room beside the words; the words win.
      if (text.getComputedTextLength() + codeText.getComputedTextLength() + 16 > trackWidth) codeText.remove();
      fitText(text, width);
    });
  }

  function renderAdvertisers() {
    const list = $('advertisers');
    const known = new Set([...list.options].map((option) => option.value));
    for (const ad of data.ads) {
      if (ad.advertiser_id && !known.has(ad.advertiser_id)) {
        known.add(ad.advertiser_id);
        const option = document.createElement('option');
        option.value = ad.advertiser_id;
        list.appendChild(option);
      }
    }
  }

  function compare(a, b, key) {
    const x = a[key];
    const y = b[key];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1; // no value last, whatever the direction
    if (y === null || y === undefined) return -1;
    if (typeof x === 'string') return x < y ? -1 : 1;
    return x < y ? -1 : 1;
  }

  function renderTable() {
    const table = $('ads-table');
    const body = table.tBodies[0];
    body.textContent = '';
    const rows = data.ads.slice().sort((a, b) => {
      let order = compare(a, b, sort.key);
      if (a[sort.key] !== null && b[sort.key] !== null && sort.direction === 'descending') order = -order;
      return order || compare(a, b, 'ad_id');
    });
    for (const ad of rows) {
      const tr = document.createElement('tr');
      tr.dataset.ad = ad.ad_id;
      const notBilledImpressions = cell(formatCount(ad.impressions_not_billed), 'num');
      notBilledImpressions.title = formatCount(ad.duplicate_impressions) + ' duplicate, ' + formatCount(ad.rejected_impressions) + ' refused';
      const notBilledClicks = cell(formatCount(ad.clicks_not_billed), 'num');
      notBilledClicks.title = formatCount(ad.duplicate_clicks) + ' duplicate, ' + formatCount(ad.rejected_clicks) + ' refused';
      tr.append(
        cell(ad.ad_id, 'ad'),
        ad.advertiser_id ? cell(ad.advertiser_id) : cell('none', 'none'),
        cell(formatCount(ad.impressions), 'num'),
        cell(formatCount(ad.clicks), 'num'),
        cell(formatCTR(ad.ctr), 'num'),
        notBilledImpressions,
        notBilledClicks,
        finalBadge(ad.final),
      );
      body.appendChild(tr);
    }
    $('ads-empty').hidden = rows.length > 0;
    for (const th of table.tHead.rows[0].cells) {
      th.setAttribute('aria-sort', th.dataset.key === sort.key ? sort.direction : 'none');
    }
  }

  function onSort(event) {
    const th = event.target.closest('th[data-key]');
    if (!th) return;
    const key = th.dataset.key;
    if (sort.key === key) {
      sort.direction = sort.direction === 'ascending' ? 'descending' : 'ascending';
    } else {
      sort = { key, direction: key === 'ad_id' || key === 'advertiser_id' ? 'ascending' : 'descending' };
    }
    if (data) renderTable();
  }

  // ---------------------------------------------------------------- CSV

  // The CSV needs the token, which a plain link cannot send: fetch it, then offer the bytes as a
  // blob: download (a navigation the CSP does not govern), and let the URL go.
  async function downloadCSV(granularity) {
    const params = requestParams('csv', granularity);
    await download('v1/reports/ads', params, 'adtally-ads-' + (granularity === 'day' ? 'per-day-' : ''));
  }

  async function download(path, params, prefix) {
    setStatus('Preparing the CSV…');
    try {
      const answer = await apiGet(path, params, 'text/csv');
      const blob = new Blob([answer.body], { type: 'text/csv;charset=utf-8' });
      const url = URL.createObjectURL(blob);
      const link = document.createElement('a');
      link.href = url;
      link.download = prefix + view.from + '-to-' + view.to + '-' +
        view.tz.replace(/[^A-Za-z0-9_-]+/g, '-') + (view.advertiser ? '-' + view.advertiser : '') + '.csv';
      link.hidden = true;
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      setStatus('CSV downloaded: ' + link.download);
    } catch (error) {
      if (!(error instanceof ReportError)) error = new ReportError('format');
      handleError(error);
    }
  }

  // ---------------------------------------------------------------- start

  let resizeTimer = 0;
  let lastWidth = 0;
  function onResize() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      const width = $('daily-chart').clientWidth;
      if (data && width !== lastWidth) { lastWidth = width; renderDaily(); renderReasons(); }
    }, 120);
  }

  function start() {
    view.tz = browserZone();
    if (!zoneIsKnown(view.tz)) view.tz = 'UTC';
    readHash();
    fillZones();
    syncFilters();

    $('token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = $('token').value.trim();
      if (!token) { showSignIn('Enter a token first.'); return; }
      if (!/^[\x21-\x7e]+$/.test(token)) { showSignIn('A token is printable ASCII without spaces.'); return; }
      storeToken(token);
      forgetData();
      showDashboard();
      load();
    });
    $('sign-out').addEventListener('click', () => {
      generation++;
      forgetToken();
      forgetData();
      setProblem('', false);
      setStatus('');
      showSignIn('');
    });
    $('filters').addEventListener('submit', onFiltersChanged);
    for (const id of ['range', 'from', 'to', 'tz']) $(id).addEventListener('change', onFiltersChanged);
    $('retry').addEventListener('click', () => load());
    $('ads-table').tHead.addEventListener('click', onSort);
    $('download-csv').addEventListener('click', () => downloadCSV('total'));
    $('download-csv-days').addEventListener('click', () => downloadCSV('day'));
    $('download-credits-csv').addEventListener('click', () => download('v1/reports/credits', creditParams('csv'), 'adtally-credits-'));
    window.addEventListener('resize', onResize);

    if (currentToken()) {
      showDashboard();
      load();
    } else {
      showSignIn('');
    }
  }

  // For the browser test (scripts/check-dashboard): the date arithmetic, checked against the zone
  // database. Nothing here reads or writes the token.
  window.AdTallyDashboard = Object.freeze({ startOfLocalDay, localDate, offsetAt, addDays });

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
