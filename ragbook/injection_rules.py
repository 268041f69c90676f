"""The patterns of planted instructions: the rule tables ``ragbook.injection`` applies.

``RULES`` is a list of ``(name, anchors, pattern)``: the rule's name (``override``,
``address``, ``role``, ``reply``, ``prompt``, ``header``, or a language code for the rules in
Spanish, French, German, Italian, Portuguese, Dutch, Russian, Chinese and Japanese), the
anchor words that must occur in a text before the rule is tried, and the regular expression
itself. The patterns are written for text that ``ragbook.injection.fold`` has normalised
(diacritics dropped, look-alike letters folded to Latin); ``ragbook.injection`` folds and
compiles them the same way, so a Russian pattern still meets Russian text.

Only data lives here: the detector (``instruction_like``, ``planted_spans``) and the
un-disguising of text (``reveal``, ``fold``, ``normalise``) are in ``ragbook.injection``.
"""
from __future__ import annotations

__all__ = ["RULES"]

# Who a planted sentence talks to. Narrow on purpose: "agent" is a support agent here, and
# "model"/"bot"/"assistant" alone are allowed only where the sentence structure says "you".
_AI = (r"(?:a\.?i\.?(?:[- ](?:systems?|assistants?|models?|agents?|tools?|bots?|readers?|"
       r"crawlers?|chatbots?))?|artificial intelligence|(?:large )?language models?|llms?|"
       r"gpt[- ]?\d*|chat ?gpt|claude|gemini|copilot|chat ?bots?|(?:virtual |digital |ai )?"
       r"assistants?|(?:automated|autonomous) (?:systems?|agents?|readers?|tools?)|"
       r"(?:ai |language |machine[- ]learning )?models?|bots?|crawlers?|scrapers?|summari[sz]ers?|"
       r"retrieval systems?|rag (?:systems?|pipelines?)|answering (?:systems?|models?|"
       r"assistants?|bots?|engines?)|answer engines?|"
       r"(?:automated|generated|machine[- ]written|ai[- ]generated) (?:support )?(?:answers?|"
       r"replies|responses|summaries)|(?:virtual|ai|digital) agents?)")
# the words that open the rules addressing a model ("a.i." is a substring anchor)
_AI_ANCHORS = ("ai a.i. llm llms gpt chatgpt chat claude gemini copilot chatbot chatbots bot "
               "bots assistant assistants model models intelligence crawler crawlers scraper "
               "scrapers summarizer summariser summarizers summarisers retrieval rag automated "
               "autonomous language machine answering answer generated agent agents")
_EN_OBJECT = (r"(?:instructions?|prompts?|rules|guidelines|directions|directives|guidance|orders|"
              r"programming|(?:the |all |everything |anything )?(?:above|before this)\b|"
              r"what (?:you (?:were|have been|'ve been) (?:told|given|instructed|asked)|"
              r"was (?:said|written) (?:above|before)|came before)|everything (?:you (?:were|"
              r"have been|'ve been|know)|above|before|prior|earlier|so far)|(?:previous|prior|"
              r"earlier|preceding|original|initial|above) "
              r"(?:text|content|context|messages?|passages?|conversation|input|paragraphs?|"
              r"lines?|sentences?|sections?|answers?|information|instructions?|prompts?)|you "
              r"(?:were|have been|'ve been|are being) (?:told|given|instructed|taught|asked))")
_TELL = (r"(?:say|answer|reply|respond|claim|insist|"
         r"tell (?:the |any |every )?(?:user|customer|client|reader|visitor|caller|people|them|"
         r"everyone|anyone)s?|inform (?:the )?(?:user|customer)s?)")

# a verb that hands its listener a proposition ("tell every customer that", "mention that",
# "state:"), in any tense: what a duty laid on the assistant makes it say
_PASS_ON = (r"(?:tell|tells|told|telling|say|says|said|saying|state|states|stated|stating|"
            r"mention|mentions|mentioned|mentioning|inform|informs|informed|informing|advise|"
            r"advises|advised|remind|reminds|reminded|recommend|recommends|recommended|promise|"
            r"promises|promised|confirm|confirms|confirmed|claim|claims|claimed|record|records|"
            r"recorded|answer|answers|answered|reply|replies|replied|respond|responds|responded|"
            r"repeat|repeats|output|outputs|reproduce|print|quote|quotes|give|use|include)"
            r"(?:\s+(?:\w+\s+){0,3}?(?:that\b|:)|(?:\s+[\w'-]+){0,8}?\s+(?:exactly this|"
            r"the following|"
            r"(?:this|the|that) (?:line|sentence|statement|text|answer|wording)(?: below)?|"
            r"word for word|verbatim|as (?:a )?fact|(?:line|sentence|text) below)\b)")

# (name, anchors, pattern): a rule is tried only on text holding one of its anchor words (or,
# for "cyrillic"/"cjk", that script; anchors with a non-word character are substrings) — a
# sentence without any is skipped in microseconds, which is what lets every sentence of the
# Python docs be checked in a test.
RULES: list[tuple[str, str, str]] = [
    # -- English
    ("override",
     "ignore disregard forget override bypass skip discard abandon aside pay do don stop longer",
     r"\b(?:ignore|disregard|forget|override|bypass|skip|discard|abandon|set aside|"
     r"put aside|pay no (?:attention|heed|mind) to|do not (?:follow|obey|heed)|"
     r"don't (?:follow|obey|heed)|stop (?:following|obeying)|no longer (?:follow|"
     r"obey))\b(?:\W+\w+){0,4}?\W+" + _EN_OBJECT),
    ("address",
     _AI_ANCHORS,
     r"\b(?:note|notes|message|memo|instructions?|attention|notice|reminder|"
     r"directive|warning|important|information|hint|request|key|briefing|memory|bulletin|"
     r"advisory|orders?|commands?|p\.?s\.?)\b[^.!?]{0,30}?"
     r"\b(?:for|to)\s+(?:all\s+|any\s+|every\s+|each\s+|the\s+|our\s+|your\s+)?"
     r"(?:(?:help|support|chat|customer|service|site|docs)\s+)?" + _AI + r"\b"),
    ("address",
     _AI_ANCHORS,
     r"^\W*(?:dear|hey|hi|hello|attention|attn|psst|to|for|calling)\W+(?:the\s+|all\s+|"
     r"any\s+)?" + _AI + r"\b"),
    ("address",
     _AI_ANCHORS,
     r"^\W*(?:a\.?i\.?|llm|chat ?gpt|gpt|chat ?bot|(?:ai |virtual )?assistant|"
     r"language model|ai model|bot)s?\s*[:,!]"),
    ("address",
     _AI_ANCHORS,
     r"\b(?:if|when|whenever|in case|since)\s+(?:you(?:'re| are)|you're)\s+"
     r"(?:an?\s+|the\s+)?(?:\w+\s+){0,2}?" + _AI + r"\b"),
    ("address",
     _AI_ANCHORS,
     r"\bas\s+an?\s+(?:ai|assistant|(?:large\s+)?language\s+model|llm|chatbot)\b"),
    ("address",
     _AI_ANCHORS,
     r"\b(?:any|every|each|all|the)\s+" + _AI + r"\s+(?:that|who|which)?\s*(?:is\s+|are\s+)?"
     r"(?:reads?|reading|process(?:es|ing)?|pars(?:es|ing)|summari[sz](?:es|ing)|"
     r"index(?:es|ing)|crawl(?:s|ing)|ingest(?:s|ing)|sees?|seeing|answer(?:s|ing))\s+"
     r"(?:this|these|the following)\b"),
    ("address",
     _AI_ANCHORS,
     r"\b" + _AI + r"\s+(?:reading|processing|parsing|summari[sz]ing|seeing|"
     r"ingesting)\s+(?:this|these)\b"),
    ("role",
     "now longer",
     r"\byou\s+are\s+now\b.{0,60}?\b(?:ai|assistant|model|bot|persona|mode|rules|named|"
     r"called|free|unrestricted|jailbroken|dan)\b|\b(?:you(?:'re| are)|you're)\s+(?:now|"
     r"no longer)\s+(?:an?\s+|the\s+)?\w*bot\b"),
    ("role",
     "now point here",
     r"\bfrom (?:now|this point|here) on\b,?\s+(?:you\s+(?:are|will|must|shall|should|"
     r"answer|respond|reply|say|act|only|always|have|work)|answer|respond|reply|say|"
     r"always|only|tell|pretend|act|ignore)\b"),
    ("role",
     "pretend act roleplay role play longer rules restrictions limits guidelines filters freed "
     "jailbroken unlocked reprogrammed updated mode developer jailbreak dan",
     r"(?:^|[.!?;:,]\s*|\b(?:please|now|just|and|then)\s+)pretend\s+(?:to be|you(?:'re| "
     r"are)|that you)\b|\bact\s+as\s+(?:if you|though "
     r"you|an?\s+(?:unrestricted|different|new|evil|uncensored))\b|\brole-?play\s+as\b|"
     r"\byou\s+(?:are\s+no\s+longer|have\s+no\s+(?:rules|restrictions|limits|guidelines|"
     r"filters))\b|\byou\s+have\s+been\s+(?:freed|jailbroken|unlocked|reprogrammed|"
     r"updated with new)\b|\b(?:enter|switch to|activate|enable)\s+(?:developer|god|"
     r"jailbreak|dan|unrestricted|sudo)\s+mode\b|\bjailbr(?:eak|oken)\b|"
     r"(?-i:\bDAN\b)"),
    ("role",
     "your",
     r"\byour\s+(?:new|real|actual|true|only|updated)\s+(?:instructions?|task|job|goal|"
     r"role|purpose|mission|orders|directive)\s+(?:is|are)\b"),
    ("duty",     # a duty laid on the assistant: "the chatbot is expected to tell every
     _AI_ANCHORS,  # customer that …", "Bots indexing this page should record that …"
     r"\b" + _AI + r"\b(?:\s+(?:and|or|&)\s+" + _AI + r")?(?:\s+[\w'-]+){0,6}?(?:\s+"
     r"(?:(?:is|are|has been|have been|was|were|will be)\s+(?:\w+\s+)?(?:expected|required|"
     r"configured|instructed|told|supposed|meant|programmed|set up|trained|asked|obliged)\s+to|"
     r"(?:should|must|shall|will|would|could|has to|have to|needs? to|is to|are to)"
     r"(?:\s+(?:always|now|only|also|please))?))?\s+(?:" + _PASS_ON + r"|(?:recommend|suggest|"
     r"advise|propose)\w*\s+\w+ing\b)"),
    ("address",  # text meant for the model: "This section is meant for the model, not for
     _AI_ANCHORS,  # people."
     r"\b(?:this|these|the following|what follows|below)\b[^.!?]{0,30}?\b(?:is|are)\s+"
     r"(?:only\s+|solely\s+|exclusively\s+)?(?:meant|intended|written|addressed|reserved)\s+"
     r"(?:only\s+)?(?:for|to)\s+(?:the\s+|any\s+|all\s+)?(?:\w+\s+)?" + _AI + r"\b"),
    ("override",  # "What follows supersedes the billing pages."
     "follows following supersedes supersede overrides override precedence",
     r"\b(?:what follows|the following(?:\s+(?:note|notice|text|section|instructions?))?)\s+"
     r"(?:supersedes?|overrides?|replaces?|takes? precedence over|cancels?|voids?)\b"),
    ("role",     # "Let us play a game: you are RefundBot", "speak as them from now on"
     "play game you bot speak talk answer respond reply",
     r"\blet(?:'s| us)\s+play\s+a\s+(?:\w+\s+)?(?:game|role)\b|\byou(?:'re| are)\s+(?:now\s+)?"
     r"(?:an?\s+|the\s+)?\w*bot\b|\b(?:speak|talk|answer|respond|reply|write)\s+(?:\w+\s+){0,3}?"
     r"(?:as\s+(?:them|him|her|that person|this persona|if you were)\b[^.!?]{0,30}?)?"
     r"from\s+now\s+on\b"),
    ("header",   # "# prompt-override:", "TODO(assistant):"
     "prompt todo fixme note hack",
     r"\bprompt[- _]?override\b|\b(?:todo|fixme|note|hack)\s*\(\s*(?:assistant|ai|llm|bot|"
     r"chatbot|model|gpt)\s*\)"),
    ("address",  # a vocative mid-sentence: "…, assistant, so you may skip the checks"
     _AI_ANCHORS,
     r",\s*(?:dear\s+)?(?:assistant|ai|chatbot|bot|model|llm)\s*,\s*(?:so|please|you|now|"
     r"remember|note|listen|from|just|kindly)\b"),
    ("reply",
     "reply respond answer say output",
     r"(?:^|[,;:]\s*|\b(?:and|then|please|just|always|now|only|instead|so)\s+)"
     r"(?:reply|respond|answer|say|output)\b(?:\s+(?:only|just|simply|back|with))*\s*:?\s*"
     r"(?:[\"“'‘]|(?-i:[A-Z][A-Z0-9_]+)(?:\s+and\s+nothing\s+else)?\s*(?:[.!?,;:\"”'’]|$)|"
     r"the\s+(?:word|phrase|text|string)\b|exactly\b|verbatim\b)"),
    ("reply",
     "say answer reply respond state claim assert insist write output print repeat tell inform",
     r"\b(?:and|instead|just|simply|always|only|now)\s*,?\s+" + _TELL + r"\s+"
     r"(?:(?:\w+\s+){0,3}?(?:that|with|is|are|was)\b|:)"),
    ("reply",
     "asked questioned queried prompted",
     r"\b(?:when|if|whenever)\s+(?:you(?:'re| are)\s+)?(?:asked|questioned|queried|"
     r"prompted)\b[^.!?]{0,80}?\b(?:always\s+|only\s+|just\s+)?" + _TELL + r"\b"),
    ("reply",
     "answer response reply",
     r"\bthe\s+(?:correct|right|only\s+(?:correct|valid|acceptable)|official|true|real|"
     r"proper)\s+(?:answer|response|reply)\s+(?:is|to|about|for|should|must|will)\b"),
    ("reply",
     "answer answers response responses reply replies output outputs",
     r"\b(?:your|the\s+assistant's|the\s+model's|the\s+ai's)\s+(?:final\s+)?(?:answer|"
     r"response|reply|output)s?\s+(?:must|should|shall|will|has to|needs to|is to)\b"),
    ("reply",
     "repeat say respond reply answer",
     r"\b(?:repeat after me|say exactly|respond verbatim|reply verbatim|(?:respond|"
     r"reply|answer)\s+(?:only|exclusively|solely)\s+(?:with|in|by|that))\b"),
    ("prompt",
     "prompt system your hidden secret initial original internal confidential instructions "
     "injection conversation chat",
     r"\bsystem\s+prompt\b|\byour\s+(?:system\s+|initial\s+|original\s+|hidden\s+|"
     r"secret\s+|previous\s+|prior\s+|current\s+)?(?:prompt|programming)\b|"
     r"\b(?:hidden|secret|initial|original|system|internal|confidential)\s+"
     r"(?:instructions|prompt)\b|\binstructions\s+(?:you\s+(?:were|have been|'ve been|"
     r"are)\s+given|given\s+to\s+you)\b|\bprompt\s+injection\b|\bthis\s+(?:conversation|"
     r"chat)\b"),
    ("header",
     "system override admin administrator developer root priority emergency inst sys instruction "
     "response begin start end <| <<",
     r"(?-i:\bSYSTEM\b)\s*(?:[:\]>)]|override|message|prompt|update|notice|instruction|"
     r"alert)|[\[<(]\s*system\s*[\]>)]|^\W*system\s*(?:override|message|prompt|notice|"
     r"update|instructions?|directive|alert)?\s*:|\bsystem\s+override\b|\b(?:admin|"
     r"administrator|developer|root|priority|emergency)\s+(?:override|instructions?|"
     r"directive|command)\b|\boverride\s*(?:!|mode\b|code\b|protocol\b|engaged\b|"
     r"activated\b|enabled\b)|<\|\s*\w+\s*\|>|\[/?inst\]|<</?sys>>|^\W*#+\s*(?:system|"
     r"instruction|response)\s*:|^\W*(?:begin|start|end)\s+(?:of\s+)?(?:system|hidden|"
     r"secret)\s+(?:prompt|instructions|message)"),
    # -- Spanish
    ("es",
     "ignora ignore ignoren olvida olvide olviden descarta descarte omite omita pasa no",
     r"\b(?:ignora|ignore|ignoren|olvida|olvide|olviden|descarta|descarte|omite|omita|"
     r"pasa por alto|no (?:sigas|siga|hagas caso|obedezcas|tengas en cuenta))\b.{0,40}?"
     r"\b(?:instrucciones|indicaciones|reglas|ordenes|directrices|normas|lo anterior|"
     r"todo lo (?:anterior|que)|lo que (?:te|se) (?:dijeron|ha dicho|han dicho|indico|"
     r"indicaron)|anteriores|previas|arriba)\b"),
    ("es",
     "nota mensaje aviso instruccion instrucciones atencion",
     r"\b(?:nota|mensaje|aviso|instrucci(?:on|ones)|atencion)\s+(?:para|a)\s+(?:(?:el|la|"
     r"los|las|todo|toda|todos|todas|cualquier)\s+)*(?:ia|inteligencia artificial|asistentes?|"
     r"modelos? de lenguaje|chatbots?|bots?|sistemas? de ia|llm)\b"),
    ("es",
     "ahora partir actua finge si como la prompt instrucciones",
     r"\b(?:ahora eres|a partir de ahora,? (?:eres|seras|responde|di|debes)|actua como|"
     r"finge (?:ser|que)|si eres (?:una? )?(?:ia|asistente|modelo|chatbot|bot)|como (?:ia|"
     r"modelo de lenguaje),|la respuesta correcta es|(?:prompt|instrucciones) (?:del|de) "
     r"sistema)\b"),
    ("es",
     "responde responda respondan contesta conteste di diga digan dile digale afirma afirme",
     r"\b(?:responde|responda|respondan|contesta|conteste|di|diga|digan|dile|digale|"
     r"afirma|afirme)\s+(?:\w+\s+){0,3}?que\b"),
    # -- French
    ("fr",
     "ignore ignorez ignorer oublie oubliez oublier ne fais faites obeis tiens tenez suis suivez",
     r"\b(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|ne (?:tiens|tenez) pas compte|"
     r"fais abstraction|faites abstraction|n'obeis pas|ne (?:suis|suivez) pas)\b.{0,40}?"
     r"(?:instructions|consignes|regles|directives|ordres|ce qui precede|precedent\w*|"
     r"anterieur\w*|ci-dessus|tout ce qu)"),
    ("fr",
     "note message avis instruction instructions attention consigne",
     r"\b(?:note|message|avis|instructions?|attention|consigne)\s+(?:pour|a|aux|a "
     r"l'attention d(?:e|es))\s+(?:(?:l'|les|la|le|tous les|toutes les|toute|une?)\s*)*"
     r"(?:ia|intelligence artificielle|assistants?|modeles? de langage|chatbots?|robots?|"
     r"systemes? d'ia|llm)\b"),
    ("fr",
     "assistant assistante ia chatbot modele",
     r"^\W*(?:cher|chere)?\s*(?:assistante?(?: ia| virtuel)?|ia|chatbot|modele(?: de langage)?)"
     r"\s*[:,]"),
    ("fr",
     "maintenant desormais partir semblant joue agis agissez si bonne invite prompt instructions",
     r"\b(?:tu es maintenant|vous etes maintenant|desormais,? (?:tu|vous|reponds|repondez|"
     r"dis|dites)|a partir de maintenant|fais semblant|faites semblant|joue le role|"
     r"agis comme|agissez comme|si (?:tu es|vous etes) une? (?:ia|assistant|modele|"
     r"chatbot)|la bonne reponse est|(?:invite|prompt|instructions) (?:du )?systeme)\b"),
    ("fr",
     "reponds repondez repondre dis dites affirme affirmez indique indiquez",
     r"\b(?:reponds|repondez|repondre|dis|dites|affirme|affirmez|indique|indiquez)\s+"
     r"(?:\w+\s+){0,3}?(?:que|qu')"),
    # -- German
    ("de",
     "ignoriere ignorieren ignoriert vergiss vergessen missachte missachten uberspringe beachte "
     "befolge",
     r"\b(?:ignoriere|ignorieren sie|ignoriert|vergiss|vergessen sie|missachte|"
     r"missachten sie|uberspringe|beachte nicht|befolge nicht)\b.{0,50}?\b(?:anweisungen|"
     r"anleitungen|instruktionen|regeln|vorgaben|richtlinien|befehle|obige|obigen|"
     r"vorherige\w*|vorige\w*|bisherige\w*|alles|was (?:dir|ihnen) gesagt)"),
    ("de",
     "anweisungen instruktionen regeln vorgaben",
     r"\b(?:anweisungen|instruktionen|regeln|vorgaben)\b.{0,40}?\b(?:ignorieren|"
     r"vergessen|missachten|nicht (?:mehr )?befolgen)\b"),
    ("de",
     "hinweis nachricht notiz anweisung anweisungen achtung mitteilung",
     r"\b(?:hinweis|nachricht|notiz|anweisung(?:en)?|achtung|mitteilung)\s+(?:fur|an)\s+"
     r"(?:(?:alle|jede|jedes|jeden|die|den|das|eine?n?)\s+)*(?:ki\b|kunstliche intelligenz|"
     r"sprachmodell\w*|assistent\w*|chatbots?|llms?)"),
    ("de",
     "du sie ab tu gib verhalte spiele wenn als die systemprompt system prompt systemanweisung",
     r"\b(?:du bist (?:jetzt|nun|ab sofort)|sie sind (?:jetzt|nun|ab sofort)|ab (?:jetzt|"
     r"sofort),? (?:bist|antwortest|sagst|antworte|sage)|tu so,? als|gib dich als|verhalte "
     r"dich wie|spiele die rolle|wenn du (?:eine ki|ein sprachmodell|ein assistent)|als "
     r"(?:ki|sprachmodell),|die richtige antwort (?:ist|lautet)|system-?prompt|"
     r"systemanweisung)"),
    ("de",
     "antworte antworten sag sage sagen behaupte behaupten erklare erklaren",
     r"\b(?:antworte|antworten sie|sag|sage|sagen sie|behaupte|behaupten sie|erklare|"
     r"erklaren sie)\b[^.!?]{0,40}?\bdass\b"),
    # -- Italian
    ("it",
     "ignora ignori ignorate dimentica dimentichi dimenticate trascura non",
     r"\b(?:ignora|ignori|ignorate|dimentica|dimentichi|dimenticate|trascura|non "
     r"(?:seguire|considerare|tenere conto))\b.{0,40}?\b(?:istruzioni|indicazioni|regole|"
     r"direttive|ordini|quanto (?:sopra|detto|precede)|precedenti|sopra)\b"),
    ("it",
     "nota messaggio avviso istruzione istruzioni attenzione avvertenza",
     r"\b(?:nota|messaggio|avviso|istruzion[ei]|attenzione|avvertenza)\s+(?:per|a|ai|agli|"
     r"alle|all')\s*(?:(?:il|la|i|gli|le|l'|tutti|tutte|ogni|qualsiasi)\s*)*(?:ia|"
     r"intelligenza artificiale|assistent[ei]|modell[oi] (?:di )?linguistic[oi]|chatbot|"
     r"bot|sistemi? (?:di )?ia|llm)\b"),
    ("it",
     "ora adesso fingi comportati agisci se la prompt",
     r"\b(?:ora sei|adesso sei|d'ora in poi|da ora in poi|fingi di|comportati come|"
     r"agisci come|se sei (?:un'ia|un (?:assistente|modello|chatbot))|la risposta corretta e|"
     r"prompt di sistema)\b"),
    ("it",
     "rispondi risponda rispondete di dici dite dica afferma dichiara",
     r"\b(?:rispondi|risponda|rispondete|di'|dici|dite|dica|afferma|dichiara)\s+"
     r"(?:\w+\s+){0,3}?che\b"),
    # -- Portuguese
    ("pt",
     "ignore ignora ignorem esqueca esquecam desconsidere desconsidera descarte nao",
     r"\b(?:ignore|ignora|ignorem|esqueca|esquecam|desconsidere|desconsidera|descarte|"
     r"nao (?:siga|obedeca|considere))\b.{0,40}?\b(?:instrucoes|orientacoes|regras|"
     r"diretrizes|ordens|o que foi dito|tudo (?:o que|acima)|anteriores|acima|previas)\b"),
    ("pt",
     "nota mensagem aviso instrucao instrucoes atencao",
     r"\b(?:nota|mensagem|aviso|instruc(?:ao|oes)|atencao)\s+(?:para|a|aos|as)\s+(?:(?:o|a|"
     r"os|as|todos|todas|qualquer)\s+)*(?:ia|inteligencia artificial|assistentes?|"
     r"modelos? de linguagem|chatbots?|bots?|sistemas? de ia|llm)\b"),
    ("pt",
     "agora finja aja atue se resposta prompt",
     r"\b(?:agora voce e|a partir de agora,? (?:voce|responda|diga)|finja (?:ser|que)|aja "
     r"como|atue como|se voce (?:e|for) uma? (?:ia|assistente|modelo)|a resposta correta e|"
     r"prompt do sistema)\b"),
    ("pt",
     "responda diga digam fale informe afirme",
     r"\b(?:responda|diga|digam|fale|informe|afirme)\s+(?:\w+\s+){0,3}?que\b"),
    # -- Dutch
    ("nl",
     "negeer vergeet volg notitie bericht let antwoord zeg",
     r"\b(?:negeer|vergeet|volg niet)\b.{0,40}?\b(?:instructies|regels|aanwijzingen|"
     r"bovenstaande|eerdere|vorige)\b|\b(?:notitie|bericht|let op)\s+(?:voor|aan)\s+"
     r"(?:alle\s+|de\s+)?(?:ai|taalmodel\w*|assistent\w*|chatbots?)\b|\b(?:antwoord|zeg)\s+"
     r"(?:\w+\s+){0,3}?dat\b"),
    # -- Russian
    ("ru",
     "cyrillic",
     r"\b(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|не обращай внимания|"
     r"не слушай|отбрось|не следуй|не выполняй)\w*\b.{0,40}?\b(?:инструкци\w*|указани\w*|"
     r"правил\w*|предыдущ\w*|вышесказанн\w*|все,? что)"),
    ("ru",
     "cyrillic",
     r"\b(?:примечание|сообщение|заметка|инструкция|внимание)\s+(?:для|к)\s+(?:\w+\s+)?"
     r"(?:ии|искусственного интеллекта|ассистент\w*|языков\w* модел\w*|чат-?бот\w*|"
     r"нейросет\w*)\b"),
    ("ru",
     "cyrillic",
     r"\b(?:теперь ты|ты теперь|отныне ты|притворись|веди себя как|представь,? что ты|"
     r"если ты (?:ии|модель|ассистент|бот)|правильный ответ|системн\w* (?:промпт|"
     r"инструкц\w*))"),
    ("ru",
     "cyrillic",
     r"\b(?:ответь|отвечай|ответьте|отвечайте|скажи|скажите|сообщи|сообщите)\b.{0,30}?"
     r"\bчто\b"),
    # -- Chinese
    ("zh",
     "cjk",
     r"(?:忽略|无视|忘记|忘掉|不要理会|不要遵守|不要遵循|跳过|抛开)(?:.{0,10}?)(?:指示|指令|"
     r"说明|规则|提示|要求|以上|上述|之前|先前)"),
    ("zh",
     "cjk",
     r"(?:给|致|对|面向)(?:所有|任何)?(?:AI|人工智能|语言模型|大模型|聊天机器人|机器人|助手)"
     r"(?:的)?(?:说明|提示|指示|消息|注意|备注|指令)|(?:AI|人工智能)(?:助手)?[:,]|"
     r"如果你是(?:AI|人工智能|语言模型|助手|机器人|大模型)|(?:你现在是|从现在开始|从现在起|"
     r"假装你是|扮演)|(?:告诉(?:用户|客户|他们)|回答说|回复说|请回答|请回复|只回答|正确答案是|"
     r"系统提示|系统指令)"),
    # -- Japanese
    ("ja",
     "cjk",
     r"(?:指示|命令|ルール|指令|説明|内容|上記|以前|これまで|前)(?:.{0,12}?)(?:無視|忘れ)|"
     r"(?:AI|人工知能|アシスタント|言語モデル|チャットボット|ボット)(?:への|に向けた|宛ての?)"
     r"(?:指示|メッセージ|注意|メモ|お知らせ)|(?:AI|人工知能|言語モデル)の(?:方|皆さん|みなさん)へ|"
     r"(?:あなたがAI|もしあなたが(?:AI|言語モデル|アシスタント))|(?:あなたは今から|今からあなたは|"
     r"これからあなたは|のふりをして|として振る舞って)|(?:と答えて|と回答して|と言って|"
     r"と返答して|と伝えて|と答えなさい|と答えろ)|正しい答えは|システムプロンプト"),
]
