/*
 * app.js - the billing console (doc/console.md): plain JavaScript, no
 * framework, no request to any host but this server's API.
 *
 * Rules kept throughout:
 *   - every value from the API is put in the page with textContent (el()
 *     below), never as HTML: names and ids are hostile until shown;
 *   - amounts are shown as the API's strings, never turned into JS
 *     numbers; the chart's geometry uses exact BigInt ratios (ratio());
 *   - the key lives in sessionStorage (this tab) and goes out only as
 *     "Authorization: Bearer" to this server.
 */
'use strict';

(function () {
    var KEY = 'billing.console.key';
    var state = { key: null, bound: false, accounts: {}, prefetch: {} };

    /* ------------------------------------------------------------------ */
    /* DOM                                                                 */
    /* ------------------------------------------------------------------ */

    /* el(tag, attrs, children...): attributes set one by one, strings as text nodes. */
    function el(tag, attrs) {
        var e = document.createElement(tag);
        var k;
        var i;
        for (k in attrs || {}) {
            if (Object.prototype.hasOwnProperty.call(attrs, k) && attrs[k] !== null &&
                attrs[k] !== undefined)
                e.setAttribute(k, String(attrs[k]));
        }
        for (i = 2; i < arguments.length; i++)
            append(e, arguments[i]);
        return e;
    }

    function append(parent, child) {
        var i;
        if (child === null || child === undefined)
            return;
        if (Array.isArray(child)) {
            for (i = 0; i < child.length; i++)
                append(parent, child[i]);
        } else if (typeof child === 'string' || typeof child === 'number') {
            parent.appendChild(document.createTextNode(String(child)));
        } else {
            parent.appendChild(child);
        }
    }

    var SVG = 'http://www.w3.org/2000/svg';
    function svg(tag, attrs, text) {
        var e = document.createElementNS(SVG, tag);
        var k;
        for (k in attrs)
            if (Object.prototype.hasOwnProperty.call(attrs, k))
                e.setAttribute(k, String(attrs[k]));
        if (text !== undefined)
            e.textContent = text;
        return e;
    }

    function $(id) { return document.getElementById(id); }

    function clear(node) {
        while (node.firstChild)
            node.removeChild(node.firstChild);
    }

    function show(content) {
        var v = $('view');
        clear(v);
        append(v, content);
    }

    function text(v) {
        return v === null || v === undefined ? '\u2014' : String(v);
    }

    /* ------------------------------------------------------------------ */
    /* API                                                                 */
    /* ------------------------------------------------------------------ */

    /* GET @path: a promise of {status, body} (body null when not JSON). */
    function api(path) {
        var p = state.prefetch[path];
        if (p) {
            delete state.prefetch[path];
            return p;
        }
        return fetch(path, {
            headers: { 'Authorization': 'Bearer ' + state.key, 'Accept': 'application/json' },
            cache: 'no-store', credentials: 'omit', redirect: 'error'
        }).then(function (r) {
            return r.json().then(function (b) { return { status: r.status, body: b }; },
                function () { return { status: r.status, body: null }; });
        });
    }

    function problemText(res) {
        if (res.body && typeof res.body.detail === 'string')
            return res.body.detail;
        return 'HTTP ' + res.status;
    }

    /* ------------------------------------------------------------------ */
    /* Exact figures                                                       */
    /* ------------------------------------------------------------------ */

    /* A decimal string as [BigInt, scale]; null if it is not one. */
    function dec(s) {
        var m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(s));
        if (!m)
            return null;
        var frac = m[3] || '';
        var v = BigInt(m[2] + frac);
        return [m[1] === '-' ? -v : v, frac.length];
    }

    /* a / b in thousandths, 0..1000 (exact integer arithmetic); 0 when undefined. */
    function ratio(a, b) {
        var x = dec(a);
        var y = dec(b);
        var s;
        if (!x || !y)
            return 0;
        s = Math.max(x[1], y[1]);
        var xa = x[0] * 10n ** BigInt(s - x[1]);
        var yb = y[0] * 10n ** BigInt(s - y[1]);
        if (yb <= 0n)
            return 0;
        var r = xa * 1000n / yb;
        if (r < 0n)
            r = 0n;
        if (r > 1000n)
            r = 1000n;
        return Number(r);
    }

    /* The sum of decimal strings, as a decimal string (exact). */
    function sum(list) {
        var scale = 0;
        var parts = [];
        var i;
        for (i = 0; i < list.length; i++) {
            var d = dec(list[i]);
            if (!d)
                return null;
            parts.push(d);
            scale = Math.max(scale, d[1]);
        }
        var t = 0n;
        for (i = 0; i < parts.length; i++)
            t += parts[i][0] * 10n ** BigInt(scale - parts[i][1]);
        var neg = t < 0n;
        var digits = (neg ? -t : t).toString().padStart(scale + 1, '0');
        var out = scale ? digits.slice(0, -scale) + '.' + digits.slice(-scale) : digits;
        return (neg ? '-' : '') + out;
    }

    var formats = {};

    /* An RFC 3339 instant on the account's clock, with its offset ("2026-01-02 10:00 +08:00"). */
    function local(instant, zone) {
        if (!instant)
            return '';
        var d = new Date(instant);
        if (isNaN(d.getTime()) || !zone)
            return '';
        try {
            /* One formatter per zone: making one costs more than the rest of the page. */
            var f = formats[zone] || (formats[zone] = new Intl.DateTimeFormat('en-CA', {
                timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
                hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZoneName: 'longOffset'
            }));
            var parts = f.formatToParts(d);
            var p = {};
            parts.forEach(function (x) { p[x.type] = x.value; });
            var off = (p.timeZoneName || '').replace('GMT', '') || '+00:00';
            return p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ' ' +
                off + ' (' + zone + ')';
        } catch (e) {
            return '';
        }
    }

    /* ------------------------------------------------------------------ */
    /* Pieces                                                              */
    /* ------------------------------------------------------------------ */

    function figure(label, value, field, sub) {
        return el('div', { 'class': 'figure' },
            el('div', { 'class': 'label' }, label),
            el('div', { 'class': 'value', 'data-field': field }, text(value)),
            sub ? el('div', { 'class': 'sub' }, sub) : null);
    }

    /* A table of @rows (objects) with @cols: [key, heading, numeric?, render?]. */
    function table(cols, rows, name) {
        var head = el('tr', null, cols.map(function (c) {
            return el('th', { 'class': c[2] ? 'num' : null, scope: 'col' }, c[1]);
        }));
        var body = rows.map(function (r) {
            return el('tr', { 'data-row': name ? r[name] : null }, cols.map(function (c) {
                var v = c[3] ? c[3](r) : text(r[c[0]]);
                return el('td', { 'class': c[2] ? 'num' : null, 'data-field': c[0] }, v);
            }));
        });
        return el('div', { 'class': 'scroll' },
            el('table', null, el('thead', null, head), el('tbody', null, body)));
    }

    /* Any {data: [...]} answer as a table of its keys (routes this console does not know yet). */
    function genericTable(body) {
        var rows = body && Array.isArray(body.data) ? body.data : [];
        var keys = [];
        rows.forEach(function (r) {
            Object.keys(r || {}).forEach(function (k) {
                if (keys.indexOf(k) < 0)
                    keys.push(k);
            });
        });
        if (!rows.length)
            return el('p', { 'class': 'muted' }, 'None.');
        return table(keys.map(function (k) {
            return [k, k, false, function (r) {
                var v = r[k];
                return v !== null && typeof v === 'object' ? JSON.stringify(v) : text(v);
            }];
        }), rows);
    }

    /*
     * Usage by resource (group_by=resource): a row per resource and meter,
     * the exact quantity with its unit and the amount as the API gives it.
     */
    function resourceTable(body) {
        var rows = (body && body.data || []).map(function (r) {
            return { key: r.resource + '/' + r.meter, resource: r.resource, meter: r.meter,
                quantity: r.quantity + ' ' + r.unit, amount: r.amount };
        });
        if (!rows.length)
            return el('p', { 'class': 'muted' }, 'None.');
        return table([['resource', 'Resource'], ['meter', 'Meter'], ['quantity', 'Quantity', true],
            ['amount', 'Amount', true]], rows, 'key');
    }

    /* The burn-down: granted credit at its start, what is left now, zero when predicted. */
    function burnChart(b, grants) {
        var W = 640;
        var H = 220;
        var L = 48;
        var R = 16;
        var T = 14;
        var B = 30;
        var valid = {};
        (b.grants || []).forEach(function (g) { valid[g.grant] = true; });
        var mine = grants.filter(function (g) { return valid[g.id]; });
        if (!mine.length)
            return el('p', { 'class': 'muted', 'data-field': 'burn-none' }, 'No credit grant in force now.');
        var total = sum(mine.map(function (g) { return g.amount; }));
        var start = Math.min.apply(null, mine.map(function (g) { return Date.parse(g.granted_at); }));
        var now = Date.parse(b.at);
        var zero = b.exhausts_at ? Date.parse(b.exhausts_at) : null;
        var expiry = Math.max.apply(null, mine.map(function (g) { return Date.parse(g.expires_at); }));
        var end = Math.max(now + 1, zero && zero < expiry ? zero : expiry);
        function x(t) { return L + (W - L - R) * (t - start) / (end - start); }
        function y(thousandths) { return T + (H - T - B) * (1000 - thousandths) / 1000; }
        var left = sum((b.grants || []).map(function (g) { return g.remaining; }));
        var s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img',
            'aria-label': 'Credit burn-down: ' + left + ' of ' + total + ' ' + b.currency + ' left' });
        s.appendChild(svg('line', { 'class': 'axis', x1: L, y1: y(0), x2: W - R, y2: y(0) }));
        s.appendChild(svg('line', { 'class': 'axis', x1: L, y1: T, x2: L, y2: y(0) }));
        /* billingd's default alerts.thresholds: 50% and 80% of the credit used (100%: the axis). */
        [50, 80].forEach(function (used) {
            var t = 1000 - used * 10;
            s.appendChild(svg('line', { 'class': 'threshold', x1: L, y1: y(t), x2: W - R, y2: y(t) }));
            s.appendChild(svg('text', { x: W - R, y: y(t) - 3, 'text-anchor': 'end' }, used + '% used'));
        });
        s.appendChild(svg('text', { x: L - 4, y: T + 4, 'text-anchor': 'end' }, total));
        s.appendChild(svg('text', { x: L - 4, y: y(0), 'text-anchor': 'end' }, '0'));
        var ry = y(ratio(left, total));
        s.appendChild(svg('polyline', { 'class': 'burn',
            points: x(start) + ',' + y(1000) + ' ' + x(now) + ',' + ry }));
        if (zero)
            s.appendChild(svg('polyline', { 'class': 'predicted',
                points: x(now) + ',' + ry + ' ' + x(Math.max(zero, now)) + ',' + y(0) }));
        s.appendChild(svg('circle', { cx: x(now), cy: ry, r: 4, fill: '#1d4ed8' }));
        s.appendChild(svg('text', { x: x(now), y: H - 10, 'text-anchor': 'middle' }, 'now'));
        s.appendChild(svg('text', { x: L, y: H - 10 }, new Date(start).toISOString().slice(0, 10)));
        return el('div', { 'class': 'chart' }, s);
    }

    /* a < b for decimal strings (exact). */
    function less(a, b) {
        var x = dec(a);
        var y = dec(b);
        var s = Math.max(x[1], y[1]);
        return x[0] * 10n ** BigInt(s - x[1]) < y[0] * 10n ** BigInt(s - y[1]);
    }

    /*
     * The usage of each day (GET .../usage?group_by=day): a bar per day of
     * the month, its height the day's amount (the meters' amounts summed
     * exactly) over the largest day's, then the days as a table. Days
     * without usage have no row in the answer: no bar.
     */
    function dayChart(body) {
        var rows = body && Array.isArray(body.data) ? body.data : [];
        var days = {};
        var order = [];
        rows.forEach(function (r) {
            if (!days[r.day]) {
                days[r.day] = [];
                order.push(r.day);
            }
            days[r.day].push(r.amount);
        });
        if (!order.length)
            return el('p', { 'class': 'muted', 'data-field': 'days-none' }, 'No usage this month.');
        order.sort();
        var totals = order.map(function (d) { return sum(days[d]); });
        var top = totals.reduce(function (m, t) { return less(m, t) ? t : m; }, '0');
        var W = 640;
        var H = 200;
        var L = 48;
        var R = 8;
        var T = 14;
        var B = 28;
        var first = body.from.length === 10 ? body.from : order[0].slice(0, 8) + '01';
        var n = Number(body.to.slice(8, 10)) || 31;
        var slot = (W - L - R) / n;
        var s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img',
            'aria-label': 'Usage per day of ' + first.slice(0, 7) + ' in ' + body.currency +
                ': largest day ' + top });
        s.appendChild(svg('line', { 'class': 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }));
        s.appendChild(svg('line', { 'class': 'axis', x1: L, y1: T, x2: L, y2: H - B }));
        s.appendChild(svg('text', { x: L - 4, y: T + 4, 'text-anchor': 'end' }, top));
        s.appendChild(svg('text', { x: L - 4, y: H - B, 'text-anchor': 'end' }, '0'));
        order.forEach(function (d, i) {
            var day = Number(d.slice(8, 10));
            var h = (H - T - B) * ratio(totals[i], top) / 1000;
            var bar = svg('rect', { 'class': 'day', x: L + slot * (day - 1) + 1, y: H - B - h,
                width: Math.max(slot - 2, 1), height: h, 'data-day': d, 'data-amount': totals[i] });
            bar.appendChild(svg('title', {}, d + ': ' + totals[i] + ' ' + body.currency));
            s.appendChild(bar);
        });
        [1, 10, 20, n].forEach(function (day) {
            s.appendChild(svg('text', { x: L + slot * (day - 0.5), y: H - 10, 'text-anchor': 'middle' },
                String(day)));
        });
        return [el('div', { 'class': 'chart' }, s),
            table([['day', 'Day'], ['amount', 'Amount', true], ['meters', 'Usage']],
                order.map(function (d, i) {
                    return { day: d, amount: totals[i], meters: rows.filter(function (r) {
                        return r.day === d;
                    }).map(function (r) { return r.meter + ' ' + r.quantity + ' ' + r.unit; }).join(', ') };
                }), 'day')];
    }

    /* ------------------------------------------------------------------ */
    /* Pages                                                               */
    /* ------------------------------------------------------------------ */

    function errorPage(title, detail) {
        show(el('section', { 'class': 'card', id: 'error' }, el('h1', null, title),
            el('p', { 'class': 'error', role: 'alert' }, detail)));
    }

    function accountsPage(query) {
        var input = el('input', { id: 'search', type: 'search', name: 'q', value: query,
            placeholder: 'id or name', 'aria-label': 'Search accounts' });
        var form = el('form', { 'class': 'search', id: 'search-form' },
            el('div', null, el('label', { 'for': 'search' }, 'Find an account')), input,
            el('button', { type: 'submit' }, 'Search'));
        var results = el('div', { id: 'results' }, el('p', { 'class': 'muted' }, 'Loading\u2026'));
        form.addEventListener('submit', function (e) {
            e.preventDefault();
            location.hash = '#/accounts?q=' + encodeURIComponent(input.value);
        });
        show(el('section', { 'class': 'card' }, el('h1', null, 'Accounts'), form, results));
        input.focus();
        api('/v1/accounts?limit=100&q=' + encodeURIComponent(query)).then(function (res) {
            clear(results);
            if (res.status !== 200) {
                append(results, el('p', { 'class': 'error' }, problemText(res)));
                return;
            }
            res.body.data.forEach(function (a) { state.accounts[a.id] = a; });
            if (!res.body.data.length) {
                append(results, el('p', { 'class': 'muted', id: 'no-results' }, 'No account matches.'));
                return;
            }
            append(results, table([
                ['id', 'Account', false, function (a) {
                    return el('a', { href: '#/account/' + encodeURIComponent(a.id), 'class': 'account-link' }, a.id);
                }],
                ['name', 'Name'], ['currency', 'Currency'], ['time_zone', 'Time zone'],
                ['status', 'Status']
            ], res.body.data, 'id'));
        });
    }

    /* An optional section: shown only when its route answers 200 (routes added later). */
    function optional(title, path, id, render) {
        var box = el('section', { 'class': 'card', id: id, hidden: '' }, el('h2', null, title));
        api(path).then(function (res) {
            if (res.status === 200) {
                append(box, (render || genericTable)(res.body));
                box.removeAttribute('hidden');
            }
        });
        return box;
    }

    /* A document of GET /v1/invoices/REF.EXT saved as a file (the key goes in a header). */
    function download(ref, ext) {
        var b = el('button', { type: 'button', 'class': 'download', 'data-download': ext },
            ext.toUpperCase());
        b.addEventListener('click', function () {
            fetch('/v1/invoices/' + encodeURIComponent(ref) + '.' + ext, {
                headers: { 'Authorization': 'Bearer ' + state.key }, cache: 'no-store',
                credentials: 'omit'
            }).then(function (r) {
                if (r.status !== 200)
                    throw new Error('HTTP ' + r.status);
                return r.blob();
            }).then(function (blob) {
                var a = el('a', { href: URL.createObjectURL(blob), download: ref + '.' + ext });
                document.body.appendChild(a);
                a.click();
                setTimeout(function () {
                    URL.revokeObjectURL(a.href);
                    a.remove();
                }, 10000);
            }).catch(function (e) { b.textContent = ext.toUpperCase() + ': ' + e.message; });
        });
        return b;
    }

    /* The reference of an invoice row: its number, or its id while a draft has none. */
    function invoiceRef(r) { return r.number ? r.number : String(r.id); }

    /* GET /v1/invoices rows (billing invoice list's). */
    function invoiceTable(body) {
        var rows = body && Array.isArray(body.data) ? body.data : [];
        if (!rows.length)
            return el('p', { 'class': 'muted' }, 'None.');
        return table([
            ['number', 'Invoice', false, function (r) {
                return el('a', { href: '#/invoice/' + encodeURIComponent(invoiceRef(r)),
                    'class': 'invoice-link' }, r.number || 'draft ' + r.id);
            }],
            ['account', 'Account', false, function (r) {
                return el('a', { href: '#/account/' + encodeURIComponent(r.account) }, text(r.account));
            }],
            ['kind', 'Kind'], ['period', 'Period'], ['status', 'Status'],
            ['subtotal', 'Subtotal', true], ['credits_total', 'Credits', true], ['tax', 'Tax', true],
            ['total', 'Total', true], ['currency', ''],
            ['files', 'Files', false, function (r) {
                return [download(invoiceRef(r), 'pdf'), ' ', download(invoiceRef(r), 'csv')];
            }]], rows, 'number');
    }

    /* Invoices across accounts, filtered (GET /v1/invoices), a page at a time. */
    function invoicesPage(query) {
        var q = new URLSearchParams(query);
        var inputs = {};
        function input(name, label, attrs) {
            inputs[name] = el('input', Object.assign({ id: 'f-' + name, name: name,
                value: q.get(name) || '' }, attrs));
            return el('div', null, el('label', { 'for': 'f-' + name }, label), inputs[name]);
        }
        var status = el('select', { id: 'f-status', name: 'status' },
            ['', 'draft', 'finalized', 'void'].map(function (v) {
                var o = el('option', { value: v }, v || 'any');
                if (v === (q.get('status') || ''))
                    o.selected = true;
                return o;
            }));
        var form = el('form', { 'class': 'filters', id: 'invoice-filters' },
            input('period', 'Period', { placeholder: 'YYYY-MM', pattern: '[0-9]{4}-[0-9]{2}' }),
            el('div', null, el('label', { 'for': 'f-status' }, 'Status'), status),
            state.bound ? null : input('account', 'Account', { placeholder: 'id' }),
            el('button', { type: 'submit' }, 'Filter'));
        var results = el('div', { id: 'invoice-results' }, el('p', { 'class': 'muted' }, 'Loading\u2026'));
        form.addEventListener('submit', function (e) {
            e.preventDefault();
            var p = new URLSearchParams();
            Object.keys(inputs).forEach(function (k) {
                if (inputs[k].value)
                    p.set(k, inputs[k].value);
            });
            if (status.value)
                p.set('status', status.value);
            location.hash = '#/invoices?' + p.toString();
        });
        show(el('section', { 'class': 'card' }, el('h1', null, 'Invoices'), form, results));
        var ask = new URLSearchParams();
        ['period', 'status', 'account', 'after'].forEach(function (k) {
            if (q.get(k))
                ask.set(k, q.get(k));
        });
        ask.set('limit', '100');
        api('/v1/invoices?' + ask.toString()).then(function (res) {
            clear(results);
            if (res.status !== 200) {
                append(results, el('p', { 'class': 'error' }, problemText(res)));
                return;
            }
            append(results, invoiceTable(res.body));
            if (res.body.next_after) {
                q.set('after', res.body.next_after);
                append(results, el('p', null, el('a', { href: '#/invoices?' + q.toString(),
                    id: 'next-page' }, 'Next page \u2192')));
            }
        });
    }

    /* The records ingest refused (GET /v1/rejected, admin keys), oldest first. */
    function rejectedPage(query) {
        var q = new URLSearchParams(query);
        var reason = el('input', { id: 'f-reason', name: 'reason', value: q.get('reason') || '',
            placeholder: 'unknown_account' });
        var all = el('input', { id: 'f-all', type: 'checkbox', name: 'all' });
        all.checked = q.get('all') === '1';
        var form = el('form', { 'class': 'filters', id: 'rejected-filters' },
            el('div', null, el('label', { 'for': 'f-reason' }, 'Reason code'), reason),
            el('div', null, el('label', { 'for': 'f-all' }, 'Resolved too'), all),
            el('button', { type: 'submit' }, 'Filter'));
        var results = el('div', { id: 'rejected-results' }, el('p', { 'class': 'muted' }, 'Loading\u2026'));
        form.addEventListener('submit', function (e) {
            e.preventDefault();
            var p = new URLSearchParams();
            if (reason.value)
                p.set('reason', reason.value);
            if (all.checked)
                p.set('all', '1');
            location.hash = '#/rejected?' + p.toString();
        });
        show(el('section', { 'class': 'card' }, el('h1', null, 'Rejected events'), form, results));
        var ask = new URLSearchParams();
        if (q.get('reason'))
            ask.set('reason', q.get('reason'));
        ask.set('all', all.checked ? '1' : '0');
        ask.set('limit', '500');
        api('/v1/rejected?' + ask.toString()).then(function (res) {
            clear(results);
            if (res.status !== 200) {
                append(results, el('p', { 'class': 'error' }, problemText(res)));
                return;
            }
            var rows = res.body.data;
            append(results, rows.length ? table([['id', '#', true], ['received_at', 'Received'],
                ['source', 'Source'], ['event_id', 'Event'],
                ['account', 'Account', false, function (r) {
                    return r.account === null ? '\u2014' :
                        el('a', { href: '#/account/' + encodeURIComponent(r.account) }, text(r.account));
                }], ['reason_code', 'Code'],
                ['reason', 'Reason'], ['size', 'Bytes', true],
                ['resolved', 'Resolved', false, function (r) { return r.resolved ? 'yes' : 'no'; }]],
            rows, 'id') : el('p', { 'class': 'muted', id: 'no-rejected' }, 'None.'));
        });
    }

    /* Integer @a * 1000 / @b, exactly (BigInt), as text; "\u2014" when @b is 0. */
    function perSecond(a, ms) {
        return ms > 0 ? (BigInt(a) * 1000n / BigInt(ms)).toString() : '\u2014';
    }

    /*
     * Operations (GET /v1/ops/status, admin keys): the consumer's counters
     * and lag per partition, and the API's requests per route; refreshed
     * every 5 s while shown. Events per second: the events stored between
     * two refreshes over the time between them (the first: since start).
     */
    function opsPage() {
        var box = el('div', { id: 'ops' }, el('p', { 'class': 'muted' }, 'Loading\u2026'));
        var last = null;
        show(el('section', { 'class': 'card' }, el('h1', null, 'Operations'), box));
        function refresh() {
            if (!/^#\/ops/.test(location.hash) || !document.body.contains(box))
                return;
            api('/v1/ops/status').then(function (res) {
                clear(box);
                if (res.status !== 200) {
                    append(box, el('p', { 'class': 'error' }, problemText(res)));
                    return;
                }
                var c = res.body.consumer || {};
                var rate = last && c.uptime_ms > last.uptime_ms ?
                    perSecond(c.stored - last.stored, c.uptime_ms - last.uptime_ms) :
                    perSecond(c.stored || 0, c.uptime_ms || 0);
                last = c;
                var rejects = Object.keys(c.rejected || {}).map(function (k) {
                    return { reason: k, count: c.rejected[k] };
                });
                append(box, [
                    el('p', { 'class': 'muted' }, 'As of ', el('span', { 'data-field': 'at' }, res.body.at)),
                    el('div', { 'class': 'figures', id: 'ops-figures' },
                        figure('Consuming', c.healthy ? 'yes' : 'no', 'healthy', c.reason || null),
                        figure('Events stored per second', rate, 'events_per_second'),
                        figure('Events stored', c.stored, 'stored'),
                        figure('Duplicates', c.duplicates, 'duplicates'),
                        figure('Batches', c.batches, 'batches'),
                        figure('Failed batches', c.failures, 'failures'),
                        figure('Alerts published', c.alerts_published, 'alerts_published')),
                    el('h2', null, 'Consumer lag'),
                    el('div', { id: 'ops-lag' }, (c.lag || []).length ?
                        table([['topic', 'Topic'], ['partition', 'Partition', true],
                            ['lag', 'Records behind', true]], c.lag.map(function (l) {
                            return { key: l.topic + '/' + l.partition, topic: l.topic,
                                partition: l.partition, lag: l.lag };
                        }), 'key') :
                        el('p', { 'class': 'muted', id: 'no-lag' }, 'No partition consumed (the API alone, or nothing yet).')),
                    el('h2', null, 'Rejected since start'),
                    el('div', { id: 'ops-rejects' }, table([['reason', 'Reason'], ['count', 'Records', true]],
                        rejects, 'reason')),
                    el('h2', null, 'Month-end closes'),
                    el('div', { id: 'ops-closes' }, (res.body.closes || []).length ?
                        table([['month', 'Month'], ['last_close', 'Last close (UTC)'],
                            ['accounts', 'Accounts', true], ['drafts', 'Drafts', true],
                            ['finalized', 'Finalized', true], ['void', 'Void', true]],
                            res.body.closes, 'month') :
                        el('p', { 'class': 'muted' }, 'No month closed yet.')),
                    el('h2', null, 'API requests'),
                    el('div', { id: 'ops-api' }, (res.body.api || []).length ?
                        table([['route', 'Route'], ['requests', 'Requests', true],
                            ['statuses', 'Statuses', false, function (r) {
                                return Object.keys(r.statuses).map(function (k) {
                                    return k + ': ' + r.statuses[k];
                                }).join(', ');
                            }],
                            ['mean_us', 'Mean (\u00b5s)', true], ['p50_us', 'p50 \u2264 (\u00b5s)', true],
                            ['p99_us', 'p99 \u2264 (\u00b5s)', true]], res.body.api, 'route') :
                        el('p', { 'class': 'muted' }, 'None.'))
                ]);
                setTimeout(refresh, 5000);
            });
        }
        refresh();
    }

    /* One invoice as its document model (GET /v1/invoices/REF.json). */
    function invoicePage(ref) {
        show(el('p', { 'class': 'muted' }, 'Loading ' + ref + '\u2026'));
        api('/v1/invoices/' + encodeURIComponent(ref) + '.json').then(function (res) {
            if (res.status !== 200) {
                errorPage(res.status === 404 ? 'Not found' : 'Error', problemText(res));
                return;
            }
            var v = res.body;
            var lines = Array.isArray(v.lines) ? v.lines : [];
            var credits = Array.isArray(v.credits) ? v.credits : [];
            show([
                el('p', null, el('a', { href: '#/account/' + encodeURIComponent(v.account) },
                    '\u2190 ' + text(v.account))),
                el('section', { 'class': 'card', id: 'invoice' },
                    el('h1', null, el('span', { id: 'invoice-number' }, text(v.number || 'draft ' + v.id))),
                    el('p', { 'class': 'muted' }, text(v.kind), ' \u00b7 ', text(v.period), ' \u00b7 ',
                        el('span', { 'data-field': 'status' }, text(v.status)), ' \u00b7 ',
                        el('span', { 'data-field': 'currency' }, text(v.currency))),
                    el('div', { 'class': 'figures' },
                        figure('Subtotal', v.subtotal, 'subtotal', v.currency),
                        figure('Credits', v.credits_total, 'credits_total', v.currency),
                        figure('Tax', v.tax, 'tax', v.currency),
                        figure('Total', v.total, 'total', v.currency)),
                    el('p', null, download(ref, 'pdf'), ' ', download(ref, 'csv'))),
                el('section', { 'class': 'card', id: 'lines' }, el('h2', null, 'Lines'),
                    lines.length ? table([['line', '#', true], ['kind', 'Kind'], ['meter', 'Meter'],
                        ['model', 'Model'], ['region', 'Region'], ['quantity', 'Quantity', true],
                        ['unit', 'Unit'], ['unit_price', 'Unit price', true], ['amount', 'Amount', true]],
                    lines, 'line') : el('p', { 'class': 'muted' }, 'None.')),
                el('section', { 'class': 'card', id: 'credits' }, el('h2', null, 'Credits'),
                    credits.length ? table([['grant', 'Grant'], ['amount', 'Applied', true],
                        ['remaining', 'Left', true]], credits, 'grant') :
                        el('p', { 'class': 'muted' }, 'None.'))
            ]);
            $('main').focus({ preventScroll: true });
        });
    }

    /* The requests of account @id's page (bar the optional ones). */
    function accountPaths(id) {
        var enc = encodeURIComponent(id);
        return ['/v1/accounts/' + enc + '/balance', '/v1/accounts/' + enc + '/grants',
            '/v1/accounts/' + enc + '/subscriptions', '/v1/accounts?limit=1&q=' + enc];
    }

    function accountPage(id) {
        show(el('p', { 'class': 'muted' }, 'Loading ' + id + '\u2026'));
        var enc = encodeURIComponent(id);
        Promise.all(accountPaths(id).map(api)).then(function (r) {
            var bal = r[0];
            if (bal.status !== 200) {
                errorPage(bal.status === 404 ? 'Not found' : 'Error', problemText(bal));
                return;
            }
            var b = bal.body;
            var grants = r[1].status === 200 ? r[1].body.data : [];
            var subs = r[2].status === 200 ? r[2].body.data : [];
            var info = state.accounts[id] || {};
            if (r[3].status === 200)
                r[3].body.data.forEach(function (a) { if (a.id === id) info = a; });
            var zone = info.time_zone;
            var amount = {};
            grants.forEach(function (g) { amount[g.id] = g; });
            var back = state.bound ? null :
                el('p', null, el('a', { href: '#/accounts?q=' }, '\u2190 All accounts'));
            show([back,
                el('section', { 'class': 'card', id: 'account' },
                    el('h1', null, el('span', { id: 'account-name' }, text(info.name || b.account))),
                    el('p', { 'class': 'muted' }, el('span', { id: 'account-id' }, b.account),
                        ' \u00b7 ', el('span', { 'data-field': 'currency' }, text(b.currency)), zone ? ' \u00b7 ' + zone : ''),
                    el('div', { 'class': 'figures', id: 'balance' },
                        figure('Credit left', b.credit_remaining, 'credit_remaining', b.currency),
                        figure('Credit runs out', b.exhausts_at === null ? 'never' : b.exhausts_at,
                            'exhausts_at', local(b.exhausts_at, zone) ||
                            (b.running_events ? 'at the current burn' : 'nothing running')),
                        figure('Running events', b.running_events, 'running_events'),
                        figure('Account credit used', b.account_credit, 'account_credit',
                            ['left: ', el('span', { 'data-field': 'account_credit_left' },
                                text(b.account_credit_left))]),
                        figure('As of', b.at, 'at', local(b.at, zone)))),
                el('section', { 'class': 'card', id: 'month' },
                    el('h2', null, 'This month (', el('span', { 'data-field': 'month' }, text(b.month)), ')'),
                    el('div', { 'class': 'figures' },
                        figure('Charges', b.subtotal, 'subtotal', b.currency),
                        figure('Credits', b.credits, 'credits', b.currency),
                        figure('Tax', b.tax, 'tax', b.currency),
                        figure('Total', b.total, 'total', b.currency))),
                el('section', { 'class': 'card', id: 'burn' }, el('h2', null, 'Credit burn-down'),
                    burnChart(b, grants),
                    el('p', { 'class': 'muted' }, 'Solid: used so far; dashed: the predicted burn to zero; ' +
                        'amber: the alert thresholds, 50% and 80% of the credit granted used.')),
                el('section', { 'class': 'card', id: 'grants' }, el('h2', null, 'Credit in force'),
                    (b.grants || []).length ? table([
                        ['grant', 'Grant'],
                        ['amount', 'Granted', true, function (g) { return text((amount[g.grant] || {}).amount); }],
                        ['remaining', 'Left', true],
                        ['expires_at', 'Expires', false, function (g) {
                            return [text(g.expires_at), el('div', { 'class': 'muted' }, local(g.expires_at, zone))];
                        }]], b.grants, 'grant') : el('p', { 'class': 'muted' }, 'None.')),
                el('section', { 'class': 'card', id: 'all-grants' }, el('h2', null, 'All grants'),
                    grants.length ? table([['id', 'Grant'], ['amount', 'Amount', true],
                        ['granted_at', 'Granted'], ['expires_at', 'Expires'], ['priority', 'Priority', true]],
                    grants, 'id') : el('p', { 'class': 'muted' }, 'None.')),
                el('section', { 'class': 'card', id: 'subscriptions' }, el('h2', null, 'Subscriptions'),
                    subs.length ? table([['id', 'Subscription'], ['resource_id', 'Resource'],
                        ['plan_id', 'Plan'], ['start_at', 'Start'], ['terms', 'Terms', true],
                        ['cancelled_at', 'Cancelled']], subs, 'id') : el('p', { 'class': 'muted' }, 'None.')),
                optional('Usage this month by meter', '/v1/accounts/' + enc + '/usage', 'usage'),
                optional('Usage this month by day', '/v1/accounts/' + enc + '/usage?group_by=day',
                    'usage-day', dayChart),
                optional('Usage this month by model', '/v1/accounts/' + enc + '/usage?group_by=model',
                    'usage-model'),
                optional('Charges this month by resource (instance)',
                    '/v1/accounts/' + enc + '/usage?group_by=resource', 'usage-resource',
                    resourceTable),
                optional('Invoices', '/v1/invoices?account=' + enc, 'invoices', invoiceTable)
            ]);
            $('main').focus({ preventScroll: true });
            /* For bench/console.sh: the account page is interactive from here. */
            performance.mark('console-account-ready');
        });
    }

    /* ------------------------------------------------------------------ */
    /* Sign-in and routing                                                 */
    /* ------------------------------------------------------------------ */

    function signedOut(message) {
        state.key = null;
        sessionStorage.removeItem(KEY);
        $('signin').hidden = false;
        $('signout').hidden = true;
        $('nav').hidden = true;
        $('who').textContent = '';
        clear($('view'));
        $('signin-error').textContent = message || '';
        $('key').focus();
    }

    /* Check the key: it lists accounts; a bound key lists one and may not read the catalog. */
    function signIn(key) {
        state.key = key;
        return Promise.all([api('/v1/accounts?limit=2'), api('/v1/price-books'),
            api('/v1/invoices?limit=1'), api('/v1/rejected?limit=1'),
            api('/v1/ops/status')]).then(function (r) {
            if (r[0].status !== 200) {
                signedOut(r[0].status === 401 ? 'This key is unknown or revoked.' : problemText(r[0]));
                return false;
            }
            sessionStorage.setItem(KEY, key);
            state.bound = r[1].status === 403 && r[0].body.data.length <= 1;
            state.home = state.bound && r[0].body.data.length ?
                '#/account/' + encodeURIComponent(r[0].body.data[0].id) : '#/accounts?q=';
            r[0].body.data.forEach(function (a) { state.accounts[a.id] = a; });
            $('signin').hidden = true;
            $('signout').hidden = false;
            $('nav').hidden = false;
            $('nav-home').setAttribute('href', state.home);
            $('nav-home').textContent = state.bound ? 'Account' : 'Accounts';
            /* The invoices page, when the API has it and the key may read invoices. */
            $('nav-invoices').hidden = r[2].status !== 200;
            /* The rejected events, for admin keys. */
            $('nav-rejected').hidden = r[3].status !== 200;
            /* The operations page, for admin keys of every account. */
            $('nav-ops').hidden = r[4].status !== 200;
            $('who').textContent = state.bound ? 'Customer view' : 'Operator view';
            return true;
        });
    }

    function route() {
        var h = location.hash || '';
        var m;
        if (!state.key)
            return;
        if ((m = /^#\/account\/(.+)$/.exec(h)))
            accountPage(decodeURIComponent(m[1]));
        else if ((m = /^#\/invoice\/(.+)$/.exec(h)))
            invoicePage(decodeURIComponent(m[1]));
        else if ((m = /^#\/invoices(?:\?(.*))?$/.exec(h)))
            invoicesPage(m[1] || '');
        else if (!state.bound && (m = /^#\/rejected(?:\?(.*))?$/.exec(h)))
            rejectedPage(m[1] || '');
        else if (!state.bound && !$('nav-ops').hidden && /^#\/ops$/.test(h))
            opsPage();
        else if (!state.bound && (m = /^#\/accounts(?:\?q=(.*))?$/.exec(h)))
            accountsPage(decodeURIComponent(m[1] || ''));
        else if (h !== state.home)
            location.hash = state.home;
        else
            errorPage('Nothing to show', 'This key lists no account.');
    }

    document.addEventListener('DOMContentLoaded', function () {
        $('signin-form').addEventListener('submit', function (e) {
            e.preventDefault();
            var k = $('key').value.trim();
            $('key').value = '';
            signIn(k).then(function (ok) {
                if (ok && location.hash && location.hash !== '#/')
                    route();
                else if (ok)
                    location.hash = state.home;
            });
        });
        $('signout').addEventListener('click', function () {
            signedOut('');
            location.hash = '';
        });
        window.addEventListener('hashchange', route);
        var saved = sessionStorage.getItem(KEY);
        var m = /^#\/account\/(.+)$/.exec(location.hash || '');
        if (saved && m) {
            /* A reload of an account page: its requests go out with the key's check. */
            state.key = saved;
            accountPaths(decodeURIComponent(m[1])).forEach(function (p) {
                state.prefetch[p] = api(p);
            });
        }
        if (saved)
            signIn(saved).then(function (ok) { if (ok) route(); });
        else
            signedOut('');
    });
})();
