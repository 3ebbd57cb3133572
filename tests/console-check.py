#!/usr/bin/python3
"""console-check.py - the browser half of tests/check-console.sh.

Drives Debian's headless Chromium through chromedriver (python3-selenium)
against a running billingd serving the console, and prints one line per
check: "ok NAME" or "FAIL NAME: DETAIL". Waits on page state
(WebDriverWait), never on time. Exit 0 when it ran to its end (whatever
the checks said), non-zero if the browser could not be driven.
"""
import argparse
import datetime
from decimal import Decimal
import json
import os
import sys
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

HOSTILE = '<script>window.__pwned=1;alert(1)</script><img src=x onerror="window.__pwned=2">'
# What the CLI prints (key=value) and the account page shows, figure for figure.
FIGURES = ['credit_remaining', 'subtotal', 'credits', 'tax', 'total', 'currency',
           'account_credit', 'account_credit_left']
WAIT = 20

failures = 0


def check(name, ok, detail=''):
    global failures
    if ok:
        print('ok ' + name, flush=True)
    else:
        failures += 1
        print('FAIL %s: %s' % (name, str(detail).replace('\n', ' ')[:400]), flush=True)


def browser(downloads):
    opts = webdriver.ChromeOptions()
    for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
              '--window-size=1280,1000', '--no-first-run', '--disable-extensions',
              '--disable-background-networking', '--disable-component-update',
              '--disable-sync', '--disable-default-apps', '--lang=en-US'):
        opts.add_argument(a)
    opts.binary_location = '/usr/bin/chromium'
    opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    opts.add_experimental_option('prefs', {'download.default_directory': downloads,
                                           'download.prompt_for_download': False})
    d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
    d.execute_cdp_cmd('Page.setDownloadBehavior', {'behavior': 'allow', 'downloadPath': downloads})
    return d


def field(d, name):
    return d.find_element(By.CSS_SELECTOR, '#view [data-field="%s"]' % name).text


def sign_in(d, url, key):
    d.get(url + '/console/')
    WebDriverWait(d, WAIT).until(EC.visibility_of_element_located((By.ID, 'key')))
    box = d.find_element(By.ID, 'key')
    box.send_keys(key)
    box.send_keys(Keys.ENTER)  # the keyboard alone signs in


def api(url, key, path):
    req = urllib.request.Request(url + path, headers={'Authorization': 'Bearer ' + key})
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        return json.loads(r.read().decode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--url', required=True)
    ap.add_argument('--bound', required=True)
    ap.add_argument('--operator', required=True)
    ap.add_argument('--balance', required=True, help='`billing account balance` output')
    ap.add_argument('--shots', required=True)
    ap.add_argument('--downloads', required=True, help='where the browser saves files')
    ap.add_argument('--topic', help='the topic billingd consumes (the lag rows name it)')
    ap.add_argument('--invoice', help='`billing invoice export --format json` of an invoice of lab-a;'
                    ' without it the API has no invoices and their section stays hidden')
    a = ap.parse_args()
    os.makedirs(a.shots, exist_ok=True)
    cli = dict(l.split('=', 1) for l in open(a.balance).read().split('\n') if '=' in l)
    check('the CLI balance has credit left to compare (not 0)',
          cli.get('credit_remaining', '0') not in ('0', '0.00'), cli)
    os.makedirs(a.downloads, exist_ok=True)
    d = browser(a.downloads)
    try:
        wait = WebDriverWait(d, WAIT)

        # 1. A bound key: its account, figure for figure as the CLI.
        sign_in(d, a.url, a.bound)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#view [data-field="credit_remaining"]'))
        wait.until(EC.text_to_be_present_in_element((By.ID, 'account-id'), 'student-b'))
        shown = {f: field(d, f) for f in FIGURES}
        wrong = {f: (shown[f], cli.get(f)) for f in FIGURES if shown[f] != cli.get(f)}
        check('the bound key sees its balance as `billing account balance`, figure for figure',
              not wrong, 'shown vs CLI: %r' % wrong)
        bal = api(a.url, a.bound, '/v1/accounts/student-b/balance')
        rows = d.find_elements(By.CSS_SELECTOR, '#grants tbody tr')
        ui = {r.get_attribute('data-row'): (r.find_element(By.CSS_SELECTOR, '[data-field="remaining"]').text,
                                            r.find_element(By.CSS_SELECTOR, '[data-field="expires_at"]').text.split('\n')[0])
              for r in rows}
        want = {g['grant']: (g['remaining'], g['expires_at']) for g in bal['grants']}
        check('each grant in force: remaining and expiry as the API gives them',
              ui == want and 'console-trial' in ui, 'shown %r, API %r' % (ui, want))
        name = d.find_element(By.ID, 'account-name').text
        check('a Chinese name is shown as stored', name == '\u738b\u5c0f\u660e', name)
        at = d.find_element(By.CSS_SELECTOR, '#balance [data-field="at"]').text
        sub = d.find_element(By.CSS_SELECTOR, '#balance [data-field="at"] + .sub').text
        local = datetime.datetime.strptime(at, '%Y-%m-%dT%H:%M:%SZ') + datetime.timedelta(hours=8)
        check('an instant on the account\'s clock with its offset',
              sub == local.strftime('%Y-%m-%d %H:%M') + ' +08:00 (Asia/Shanghai)', (at, sub))
        check('the burn-down chart is drawn (SVG)',
              len(d.find_elements(By.CSS_SELECTOR, '#burn svg polyline.burn')) == 1, 'no polyline')
        check('the customer view offers no operations page',
              not d.find_element(By.ID, 'nav-ops').is_displayed(), 'shown')
        check('the customer view has no accounts list',
              d.find_element(By.ID, 'who').text == 'Customer view' and
              not d.find_elements(By.ID, 'search'), d.find_element(By.ID, 'who').text)
        # The day chart: a bar per day with usage, its amount the API's days summed exactly.
        try:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#usage-day svg rect.day'))
            bars = {r.get_attribute('data-day'): r.get_attribute('data-amount')
                    for r in d.find_elements(By.CSS_SELECTOR, '#usage-day svg rect.day')}
        except TimeoutException:
            bars = {}
        days = api(a.url, a.bound, '/v1/accounts/student-b/usage?group_by=day')
        want = {}
        for r in days['data']:
            want[r['day']] = want.get(r['day'], Decimal(0)) + Decimal(r['amount'])
        check('the usage chart per day: its days and amounts are the API\'s (group_by=day)',
              bars and {k: Decimal(v) for k, v in bars.items()} == want,
              'chart %r, API %r' % (bars, want))
        # This month's charges by resource (instance): the API's rows, figure for figure.
        try:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#usage-resource tbody tr'))
        except TimeoutException:
            pass
        shown = sorted((r.get_attribute('data-row'),
                        r.find_element(By.CSS_SELECTOR, '[data-field="quantity"]').text,
                        r.find_element(By.CSS_SELECTOR, '[data-field="amount"]').text)
                       for r in d.find_elements(By.CSS_SELECTOR, '#usage-resource tbody tr'))
        res = api(a.url, a.bound, '/v1/accounts/student-b/usage?group_by=resource')
        want = sorted((r['resource'] + '/' + r['meter'], r['quantity'] + ' ' + r['unit'], r['amount'])
                      for r in res['data'])
        check('the charges by resource (instance) are the API\'s (group_by=resource)',
              shown and shown == want, 'page %r, API %r' % (shown, want))
        d.save_screenshot(os.path.join(a.shots, 'console-account.png'))
        d.set_window_size(390, 844)
        overflow = d.execute_script('return document.documentElement.scrollWidth - window.innerWidth')
        check('a phone width (390 px) needs no sideways scrolling', overflow <= 0, '%s px' % overflow)
        d.save_screenshot(os.path.join(a.shots, 'console-phone.png'))
        d.set_window_size(1280, 1000)

        # 2. The bound key and another account: not found, nothing of it shown.
        d.execute_script("location.hash = '#/account/lab-a'")
        try:
            wait.until(EC.presence_of_element_located((By.ID, 'error')))
            txt = d.find_element(By.ID, 'view').text
            check('the bound key cannot open another account (UI: Not found)',
                  'Not found' in txt and 'Vision' not in txt and
                  not d.find_elements(By.CSS_SELECTOR, '[data-field="credit_remaining"]'), txt)
        except TimeoutException:
            check('the bound key cannot open another account (UI: Not found)', False,
                  d.find_element(By.ID, 'view').text)
        d.find_element(By.ID, 'signout').click()
        wait.until(EC.visibility_of_element_located((By.ID, 'key')))
        check('sign out forgets the key', d.execute_script(
            'return sessionStorage.length') == 0, 'sessionStorage not empty')

        # The keyboard: Tab goes from the key to the sign-in button.
        d.find_element(By.ID, 'key').click()
        d.switch_to.active_element.send_keys(Keys.TAB)
        focused = d.switch_to.active_element.get_attribute('id')
        check('keyboard: Tab moves from the key to Sign in', focused == 'signin-button', focused)

        # 3. An operator key finds an account by (part of) its name.
        sign_in(d, a.url, a.operator)
        wait.until(EC.presence_of_element_located((By.ID, 'search')))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#results tbody tr'))
        search = d.find_element(By.ID, 'search')
        search.clear()
        search.send_keys('university')
        search.send_keys(Keys.ENTER)
        wait.until(lambda d: [r.get_attribute('data-row') for r in
                              d.find_elements(By.CSS_SELECTOR, '#results tbody tr')] == ['lab-a'])
        check('an operator key finds an account by name', True)
        d.save_screenshot(os.path.join(a.shots, 'console-accounts.png'))
        link = d.find_element(By.CSS_SELECTOR, '#results a.account-link')
        link.send_keys(Keys.ENTER)  # keyboard: a focused link opens
        wait.until(EC.text_to_be_present_in_element((By.ID, 'account-id'), 'lab-a'))
        check('the operator opens it: its name and subscriptions',
              d.find_element(By.ID, 'account-name').text == 'Example University Vision Lab' and
              d.find_elements(By.CSS_SELECTOR, '#subscriptions tr[data-row="sub-lab-a-1"]'),
              d.find_element(By.ID, 'account-name').text)

        # 4. A hostile name is text: no script ran, no element injected.
        d.execute_script("location.hash = '#/accounts?q=hostile'")
        wait.until(lambda d: [r.get_attribute('data-row') for r in
                              d.find_elements(By.CSS_SELECTOR, '#results tbody tr')] == ['x-hostile'])
        listed = d.find_element(By.CSS_SELECTOR,
                                '#results tr[data-row="x-hostile"] [data-field="name"]').text
        d.execute_script("location.hash = '#/account/x-hostile'")
        wait.until(EC.text_to_be_present_in_element((By.ID, 'account-id'), 'x-hostile'))
        alert = True
        try:
            d.switch_to.alert.dismiss()
        except NoAlertPresentException:
            alert = False
        injected = d.execute_script(
            "return [window.__pwned, document.querySelectorAll('img, #view script').length]")
        check('a name with <script> and <img onerror> is shown as text',
              d.find_element(By.ID, 'account-name').text == HOSTILE and not alert and
              injected == [None, 0], 'name %r, alert %s, pwned/elements %r' %
              (d.find_element(By.ID, 'account-name').text, alert, injected))
        check('... and in the accounts list', listed == HOSTILE, listed)

        # 5. The invoices: lab-a's list, one invoice figure for figure, its PDF.
        d.execute_script("location.hash = '#/account/lab-a'")
        wait.until(EC.text_to_be_present_in_element((By.ID, 'account-id'), 'lab-a'))
        if a.invoice:
            doc = json.load(open(a.invoice))
            num = doc['number']
            wait.until(EC.visibility_of_element_located(
                (By.CSS_SELECTOR, '#invoices tr[data-row="%s"] a.invoice-link' % num)))
            d.find_element(By.CSS_SELECTOR,
                           '#invoices tr[data-row="%s"] a.invoice-link' % num).send_keys(Keys.ENTER)
            wait.until(EC.text_to_be_present_in_element((By.ID, 'invoice-number'), num))
            wrong = {}
            for f in ('subtotal', 'credits_total', 'tax', 'total', 'status', 'currency'):
                if field(d, f) != doc[f]:
                    wrong[f] = (field(d, f), doc[f])
            for line in doc['lines']:
                row = d.find_elements(By.CSS_SELECTOR, '#lines tr[data-row="%s"]' % line['line'])
                for f in ('quantity', 'unit_price', 'amount', 'meter', 'model', 'region'):
                    got = row[0].find_element(By.CSS_SELECTOR, '[data-field="%s"]' % f).text \
                        if row else None
                    if got != line[f]:
                        wrong['line %s %s' % (line['line'], f)] = (got, line[f])
            check('an invoice shows every figure as `billing invoice export --format json`',
                  not wrong and doc['lines'], wrong or 'no lines')
            d.save_screenshot(os.path.join(a.shots, 'console-invoice.png'))
            d.find_element(By.CSS_SELECTOR, '#invoice button[data-download="pdf"]').click()
            path = os.path.join(a.downloads, num + '.pdf')
            try:
                WebDriverWait(d, WAIT).until(lambda d: os.path.exists(path))
                head = open(path, 'rb').read(5)
            except TimeoutException:
                head = os.listdir(a.downloads)
            check('the invoice downloads as a PDF', head == b'%PDF-', head)
            check('the Invoices link is shown (the API has them)',
                  d.find_element(By.ID, 'nav-invoices').is_displayed(), 'hidden')
            d.execute_script("location.hash = '#/invoices?period=2026-01&status=finalized'")
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#invoice-results tbody tr'))
            rows = d.find_elements(By.CSS_SELECTOR, '#invoice-results tbody tr')
            seen = [(r.get_attribute('data-row'),
                     r.find_element(By.CSS_SELECTOR, '[data-field="period"]').text,
                     r.find_element(By.CSS_SELECTOR, '[data-field="status"]').text) for r in rows]
            check('the invoices page filters by period and status',
                  num in [x[0] for x in seen] and
                  all(x[1] == '2026-01' and x[2] == 'finalized' for x in seen), seen)
        else:
            wait.until(lambda d: d.execute_script(
                "return performance.getEntriesByType('resource')"
                ".some(e => e.name.indexOf('/v1/invoices?account=lab-a') >= 0)"))
            check('no invoices route: the invoices section stays hidden',
                  d.find_element(By.ID, 'invoices').get_attribute('hidden') is not None, 'shown')
            check('no invoices route: no Invoices link',
                  not d.find_element(By.ID, 'nav-invoices').is_displayed(), 'shown')

        # 6. The operations page: the record ingest refused, with its reason.
        check('the Rejected link is shown to an admin key',
              d.find_element(By.ID, 'nav-rejected').is_displayed(), 'hidden')
        d.find_element(By.ID, 'nav-rejected').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#rejected-results tbody tr'))
        rows = [(r.find_element(By.CSS_SELECTOR, '[data-field="event_id"]').text,
                 r.find_element(By.CSS_SELECTOR, '[data-field="reason_code"]').text,
                 r.find_element(By.CSS_SELECTOR, '[data-field="account"] a').get_attribute('href'))
                for r in d.find_elements(By.CSS_SELECTOR, '#rejected-results tbody tr')]
        check('the rejected events page shows the refused record, its reason and a link to its account',
              len(rows) == 1 and rows[0][:2] == ('console-bad-0', 'unknown_account') and
              rows[0][2].endswith('#/account/nobody'), rows)

        # 7. The operations page: the lag per partition and the counters the route gives.
        check('the Operations link is shown to an admin key',
              d.find_element(By.ID, 'nav-ops').is_displayed(), 'hidden')
        d.find_element(By.ID, 'nav-ops').click()
        try:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#ops-lag tbody tr'))
        except TimeoutException:
            pass
        shown = sorted((r.find_element(By.CSS_SELECTOR, '[data-field="topic"]').text,
                        r.find_element(By.CSS_SELECTOR, '[data-field="partition"]').text,
                        r.find_element(By.CSS_SELECTOR, '[data-field="lag"]').text)
                       for r in d.find_elements(By.CSS_SELECTOR, '#ops-lag tbody tr'))
        ops = api(a.url, a.operator, '/v1/ops/status')
        lag = sorted((l['topic'], str(l['partition']), str(l['lag'])) for l in ops['consumer']['lag'])
        check('the operations page shows the lag per partition GET /v1/ops/status gives',
              shown and shown == lag and (not a.topic or all(x[0] == a.topic for x in shown)),
              'page %r, route %r' % (shown, lag))
        figs = {f: d.find_element(By.CSS_SELECTOR, '#ops-figures [data-field="%s"]' % f).text
                for f in ('stored', 'batches', 'failures')}
        want = {f: str(ops['consumer'][f]) for f in figs}
        check('... and the events stored, batches and failures it gives', figs == want,
              'page %r, route %r' % (figs, want))
        rows = {r.get_attribute('data-row'): r.find_element(By.CSS_SELECTOR, '[data-field="requests"]').text
                for r in d.find_elements(By.CSS_SELECTOR, '#ops-api tbody tr')}
        check('... and the API\'s requests per route',
              int(rows.get('/v1/accounts/{id}/balance', '0')) >= 1 and
              '/v1/ops/status' in rows, rows)
        closes = [tuple(r.find_element(By.CSS_SELECTOR, '[data-field="%s"]' % f).text
                        for f in ('month', 'last_close', 'accounts', 'drafts', 'finalized', 'void'))
                  for r in d.find_elements(By.CSS_SELECTOR, '#ops-closes tbody tr')]
        want = [(c['month'], c['last_close'], str(c['accounts']), str(c['drafts']),
                 str(c['finalized']), str(c['void'])) for c in ops['closes']]
        check('... and the last close of each month with its invoices by status, as the route',
              closes and closes == want and closes[0][0] == '2026-01' and closes[0][4] != '0',
              'page %r, route %r' % (closes, want))
        d.save_screenshot(os.path.join(a.shots, 'console-ops.png'))

        # 8. Every request stayed on this server; no JavaScript error.
        names = d.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".concat(performance.getEntriesByType('navigation').map(e => e.name))")
        away = [n for n in names if not n.startswith(a.url + '/')]
        check('no console request goes to another host', names and not away, away or 'no entries')
        logs = d.get_log('browser')
        # 404/403 of the API are answers the console expects (another account, optional
        # routes not there yet, a bound key and the catalog); anything else is an error.
        errors = [l['message'] for l in logs if l['level'] == 'SEVERE' and
                  not ('Failed to load resource' in l['message'] and '/v1/' in l['message'])]
        check('no JavaScript error in the console', not errors, errors)
    finally:
        d.quit()
    return 0


if __name__ == '__main__':
    sys.exit(main())
