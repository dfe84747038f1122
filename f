ERR One or more scores can't be converted into double

